package remote

import "testing"

func TestUserAgentRoundTrip(t *testing.T) {
	r, c, ok := ParseUserAgent(UserAgent("replica-1", "fleet-0-03"))
	if !ok || r != "replica-1" || c != "fleet-0-03" {
		t.Fatalf("got %q %q %v", r, c, ok)
	}
	for _, ua := range []string{"", "clustershard/v0.0.0 (linux/amd64) kubernetes/$Format", "clustershard-remote replica= cluster=x", "clustershard-remote cluster=x replica=y"} {
		if _, _, ok := ParseUserAgent(ua); ok {
			t.Errorf("%q parsed as a remote User-Agent", ua)
		}
	}
}
