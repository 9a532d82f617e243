package helmrelease

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restGetter gives Helm's kube client a rest.Config instead of a kubeconfig
// file, with namespace as the default namespace of the chart's objects.
type restGetter struct {
	cfg       *rest.Config
	namespace string

	once      sync.Once
	discovery discovery.CachedDiscoveryInterface
	err       error
}

var _ genericclioptions.RESTClientGetter = (*restGetter)(nil)

func newRESTGetter(cfg *rest.Config, namespace string) *restGetter {
	return &restGetter{cfg: cfg, namespace: namespace}
}

// ToRESTConfig returns a copy of the remote cluster's rest.Config.
func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

// ToDiscoveryClient returns one memory-cached discovery client per getter:
// Helm invalidates it after installing a chart's CRDs.
func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.once.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(g.cfg))
		if err != nil {
			g.err = err
			return
		}
		g.discovery = memory.NewMemCacheClient(dc)
	})
	return g.discovery, g.err
}

// ToRESTMapper returns a mapper backed by the discovery client.
func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil), nil
}

// ToRawKubeConfigLoader only answers the namespace: clients are built from
// ToRESTConfig.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}
