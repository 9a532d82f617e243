package remote

import "strings"

const userAgentProduct = "clustershard-remote"

// UserAgent is the User-Agent of every request a replica sends to a
// remote cluster on behalf of one RemoteCluster; replica is the process's
// holder identity (name@incarnation). The remote API server's audit log then
// attributes each write to the process and cluster it was made for, which is how the drill proves no two replicas wrote for one cluster
// at once.
func UserAgent(replica, cluster string) string {
	return userAgentProduct + " replica=" + replica + " cluster=" + cluster
}

// ParseUserAgent returns the replica and cluster of a UserAgent;
// ok is false for any other User-Agent.
func ParseUserAgent(ua string) (replica, cluster string, ok bool) {
	f := strings.Fields(ua)
	if len(f) != 3 || f[0] != userAgentProduct {
		return "", "", false
	}
	replica, rok := strings.CutPrefix(f[1], "replica=")
	cluster, cok := strings.CutPrefix(f[2], "cluster=")
	return replica, cluster, rok && cok && replica != "" && cluster != ""
}
