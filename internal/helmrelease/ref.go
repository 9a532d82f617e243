package helmrelease

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// Kind says where a chart comes from.
type Kind string

// Chart sources, from the form of the chart reference.
const (
	// KindLocal is a chart folder or archive in the controller's file system.
	KindLocal Kind = "local"
	// KindArchive is a chart archive (.tgz) at an http(s) URL.
	KindArchive Kind = "archive"
	// KindRepository is a chart of an HTTP Helm repository: the reference's
	// last path element is the chart's name, the rest the repository's URL.
	KindRepository Kind = "repository"
	// KindOCI is a chart in an OCI registry.
	KindOCI Kind = "oci"
)

// Ref names a chart and its version (exact, a semver constraint, or empty).
type Ref struct {
	// Chart is the reference of spec.install.helm.chart.
	Chart string
	// Version is spec.install.helm.version.
	Version string
}

// Kind returns where the chart comes from.
func (r Ref) Kind() Kind {
	switch {
	case strings.HasPrefix(r.Chart, "oci://"):
		return KindOCI
	case strings.HasPrefix(r.Chart, "https://"), strings.HasPrefix(r.Chart, "http://"):
		if strings.HasSuffix(r.Chart, ".tgz") || strings.HasSuffix(r.Chart, ".tar.gz") {
			return KindArchive
		}
		return KindRepository
	}
	return KindLocal
}

// Exact reports whether Version names one version (not a constraint, not
// empty): such a chart is cached for good.
func (r Ref) Exact() bool {
	_, err := semver.StrictNewVersion(strings.TrimPrefix(r.Version, "v"))
	return err == nil
}

// String is the reference as "chart@version".
func (r Ref) String() string {
	if r.Version == "" {
		return r.Chart
	}
	return r.Chart + "@" + r.Version
}

// Validate checks the reference's form without fetching anything.
func (r Ref) Validate() error {
	if r.Chart == "" {
		return fmt.Errorf("chart reference is empty")
	}
	if r.Version != "" && !r.Exact() {
		if _, err := semver.NewConstraint(r.Version); err != nil {
			return fmt.Errorf("version %q is neither a version nor a semver constraint: %w", r.Version, err)
		}
	}
	switch r.Kind() {
	case KindLocal:
		return nil
	case KindOCI:
		if _, err := url.Parse(r.Chart); err != nil {
			return fmt.Errorf("chart %q: %w", r.Chart, err)
		}
		return nil
	}
	u, err := url.Parse(r.Chart)
	if err != nil {
		return fmt.Errorf("chart %q: %w", r.Chart, err)
	}
	if u.Host == "" || path.Base(u.Path) == "" || path.Base(u.Path) == "/" || path.Base(u.Path) == "." {
		return fmt.Errorf("chart %q: want https://host/repository/chart-name or an archive URL ending in .tgz", r.Chart)
	}
	return nil
}

// repository splits a KindRepository reference into the repository's URL
// and the chart's name.
func (r Ref) repository() (repoURL, name string, err error) {
	u, err := url.Parse(r.Chart)
	if err != nil {
		return "", "", err
	}
	name = path.Base(u.Path)
	u.Path = path.Dir(u.Path)
	if u.Path == "." {
		u.Path = ""
	}
	return u.String(), name, nil
}

// loadLocal reads a local chart and checks its version against Version.
func loadLocal(r Ref) (*chart.Chart, error) {
	ch, err := loader.Load(r.Chart)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", r.Chart, err)
	}
	if err := checkVersion(r, ch); err != nil {
		return nil, err
	}
	return ch, nil
}

// checkVersion requires a chart's version to match Version (exact or constraint).
func checkVersion(r Ref, ch *chart.Chart) error {
	if r.Version == "" {
		return nil
	}
	got, err := semver.NewVersion(ch.Metadata.Version)
	if err != nil {
		return fmt.Errorf("chart %s has an invalid version %q: %w", r.Chart, ch.Metadata.Version, err)
	}
	c, err := semver.NewConstraint(r.Version)
	if err != nil {
		return fmt.Errorf("version %q: %w", r.Version, err)
	}
	if !c.Check(got) {
		return fmt.Errorf("chart %s has version %s, spec asks for %s", r.Chart, ch.Metadata.Version, r.Version)
	}
	return nil
}
