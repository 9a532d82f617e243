package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// Error is a kubeconfig that cannot be used, with a condition reason. Its
// message never contains the kubeconfig's content.
type Error struct {
	// Reason is a CamelCase condition reason.
	Reason string
	// Message explains the problem for a human.
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrInvalid is matched by every *Error with errors.Is.
var ErrInvalid = errors.New("invalid kubeconfig")

// Is makes errors.Is(err, ErrInvalid) true for every *Error.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// DefaultTimeout is the replica's default bound of one remote request.
const DefaultTimeout = 30 * time.Second

// Options shape the rest.Config built from a kubeconfig.
type Options struct {
	// AllowExec permits exec and auth-provider credentials.
	AllowExec bool
	// QPS, Burst and Timeout are set on the rest.Config when non-zero.
	QPS     float32
	Burst   int
	Timeout time.Duration
}

// Hash returns a short stable hash of kubeconfig content.
func Hash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:8])
}

// Parse validates kubeconfig content and builds its rest.Config.
func Parse(content []byte, o Options) (*rest.Config, error) {
	if len(content) == 0 {
		return nil, &Error{Reason: v1alpha1.ReasonKubeConfigMalformed, Message: "the kubeconfig is empty"}
	}
	cfg, err := clientcmd.Load(content)
	if err != nil {
		return nil, &Error{Reason: v1alpha1.ReasonKubeConfigMalformed, Message: "the kubeconfig does not parse: " + sanitize(err)}
	}
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if ctxName == "" || !ok {
		return nil, &Error{Reason: v1alpha1.ReasonKubeConfigIncomplete, Message: fmt.Sprintf("the kubeconfig has no usable current context (%q)", ctxName)}
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok || cluster.Server == "" {
		return nil, &Error{Reason: v1alpha1.ReasonKubeConfigIncomplete, Message: fmt.Sprintf("the kubeconfig's context %q names no cluster with a server", ctxName)}
	}
	if auth, ok := cfg.AuthInfos[kctx.AuthInfo]; ok && !o.AllowExec {
		if auth.Exec != nil {
			return nil, &Error{Reason: v1alpha1.ReasonKubeConfigExecNotAllowed, Message: fmt.Sprintf("the kubeconfig's user %q uses exec credentials (command %q), which would run inside the controller; start it with --allow-exec-kubeconfig to permit them", kctx.AuthInfo, auth.Exec.Command)}
		}
		if auth.AuthProvider != nil {
			return nil, &Error{Reason: v1alpha1.ReasonKubeConfigExecNotAllowed, Message: fmt.Sprintf("the kubeconfig's user %q uses the %q auth-provider plugin; start the controller with --allow-exec-kubeconfig to permit it", kctx.AuthInfo, auth.AuthProvider.Name)}
		}
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, &Error{Reason: v1alpha1.ReasonKubeConfigIncomplete, Message: "the kubeconfig cannot be used: " + sanitize(err)}
	}
	if o.QPS > 0 {
		rc.QPS = o.QPS
	}
	if o.Burst > 0 {
		rc.Burst = o.Burst
	}
	if o.Timeout > 0 {
		rc.Timeout = o.Timeout
	}
	return rc, nil
}

// sanitize keeps a parser error's first line, cut before any quoted text,
// since parser errors can quote the offending (possibly secret) bytes.
func sanitize(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if i := strings.IndexAny(msg, "'\"`"); i >= 0 {
		msg = strings.TrimSpace(msg[:i]) + " (details withheld)"
	}
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	return msg
}
