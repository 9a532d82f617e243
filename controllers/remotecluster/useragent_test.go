package remotecluster

import "testing"

func TestRemoteUserAgentRoundTrip(t *testing.T) {
	r, c, ok := ParseRemoteUserAgent(RemoteUserAgent("replica-1", "fleet-0-03"))
	if !ok || r != "replica-1" || c != "fleet-0-03" {
		t.Fatalf("got %q %q %v", r, c, ok)
	}
	for _, ua := range []string{"", "clustershard/v0.0.0 (linux/amd64) kubernetes/$Format", "clustershard-remote replica= cluster=x", "clustershard-remote cluster=x replica=y"} {
		if _, _, ok := ParseRemoteUserAgent(ua); ok {
			t.Errorf("%q parsed as a remote User-Agent", ua)
		}
	}
}
