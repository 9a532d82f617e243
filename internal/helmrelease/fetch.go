package helmrelease

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
)

// fetcher downloads charts with Helm's getters and registry client.
type fetcher struct {
	dir      string
	getters  getter.Providers
	registry *registry.Client
}

func newFetcher(dir string, timeout time.Duration, plainHTTP bool) (*fetcher, error) {
	withTimeout := func(o ...getter.Option) []getter.Option {
		return append([]getter.Option{getter.WithTimeout(timeout)}, o...)
	}
	opts := []registry.ClientOption{
		// No helm home: credentials come from this file (absent: anonymous) or Docker's.
		registry.ClientOptCredentialsFile(filepath.Join(dir, "registry-config.json")),
		registry.ClientOptEnableCache(true),
	}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("OCI registry client: %w", err)
	}
	return &fetcher{
		dir:      dir,
		registry: rc,
		getters: getter.Providers{
			{Schemes: []string{"http", "https"}, New: func(o ...getter.Option) (getter.Getter, error) {
				return getter.NewHTTPGetter(withTimeout(o...)...)
			}},
			{Schemes: []string{registry.OCIScheme}, New: func(o ...getter.Option) (getter.Getter, error) {
				return getter.NewOCIGetter(withTimeout(append(o, getter.WithRegistryClient(rc))...)...)
			}},
		},
	}, nil
}

// resolve finds where the chart of a remote reference is, and the key of
// its content: chart@version (one exact version has one content), or the
// archive URL.
func (f *fetcher) resolve(r Ref) (key, href string, err error) {
	switch r.Kind() {
	case KindArchive:
		return r.Chart, r.Chart, nil
	case KindRepository:
		return f.resolveInRepository(r)
	case KindOCI:
		return f.resolveOCI(r)
	}
	return "", "", fmt.Errorf("chart %s is not remote", r.Chart)
}

// download fetches the archive at href (from resolve) and loads it.
func (f *fetcher) download(r Ref, href string) (*chart.Chart, error) {
	var (
		data []byte
		err  error
	)
	if r.Kind() == KindOCI {
		var res *registry.PullResult
		if res, err = f.registry.Pull(href); err != nil {
			return nil, fmt.Errorf("pull %s: %w", href, err)
		}
		data = res.Chart.Data
	} else if data, err = f.get(href); err != nil {
		return nil, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", href, err)
	}
	if err := checkVersion(r, ch); err != nil {
		return nil, err
	}
	return ch, nil
}

func (f *fetcher) get(href string) ([]byte, error) {
	u, err := url.Parse(href)
	if err != nil {
		return nil, err
	}
	g, err := f.getters.ByScheme(u.Scheme)
	if err != nil {
		return nil, err
	}
	buf, err := g.Get(href)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", href, err)
	}
	return buf.Bytes(), nil
}

// resolveInRepository reads the repository's index.yaml and picks the
// version.
func (f *fetcher) resolveInRepository(r Ref) (key, href string, err error) {
	repoURL, name, err := r.repository()
	if err != nil {
		return "", "", err
	}
	cr, err := repo.NewChartRepository(&repo.Entry{Name: "clustershard", URL: repoURL}, f.getters)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return "", "", err
	}
	cr.CachePath, err = os.MkdirTemp(f.dir, "index-")
	if err != nil {
		return "", "", err
	}
	defer func() { _ = os.RemoveAll(cr.CachePath) }()
	indexFile, err := cr.DownloadIndexFile()
	if err != nil {
		return "", "", fmt.Errorf("%s is not a reachable chart repository: %w", repoURL, err)
	}
	index, err := repo.LoadIndexFile(indexFile)
	if err != nil {
		return "", "", fmt.Errorf("index of %s: %w", repoURL, err)
	}
	cv, err := index.Get(name, r.Version)
	if err != nil {
		return "", "", fmt.Errorf("chart %q version %q not found in repository %s", name, r.Version, repoURL)
	}
	if len(cv.URLs) == 0 {
		return "", "", fmt.Errorf("chart %q version %s in %s has no download URL", name, cv.Version, repoURL)
	}
	href, err = repo.ResolveReferenceURL(repoURL, cv.URLs[0])
	if err != nil {
		return "", "", err
	}
	return r.Chart + "@" + cv.Version, href, nil
}

// resolveOCI picks the tag of oci://host/path/name: the reference's own, or
// the newest that matches Version.
func (f *fetcher) resolveOCI(r Ref) (key, href string, err error) {
	ref := strings.TrimPrefix(r.Chart, "oci://")
	if !strings.Contains(path.Base(ref), ":") {
		tag := r.Version
		if !r.Exact() {
			tags, err := f.registry.Tags(ref)
			if err != nil {
				return "", "", fmt.Errorf("list tags of %s: %w", r.Chart, err)
			}
			if tag, err = registry.GetTagMatchingVersionOrConstraint(tags, r.Version); err != nil {
				return "", "", fmt.Errorf("%s: %w", r.Chart, err)
			}
		}
		ref += ":" + tag
	}
	return "oci://" + ref, ref, nil
}
