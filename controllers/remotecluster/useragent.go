package remotecluster

import "strings"

const userAgentProduct = "clustershard-remote"

// RemoteUserAgent is the User-Agent of every request a replica sends to a
// remote cluster on behalf of one RemoteCluster; replica is the process's
// holder identity (name@incarnation). The remote API server's audit log then
// attributes each write to the process and cluster it was made for, which is how the drill proves no two replicas wrote for one cluster
// at once.
func RemoteUserAgent(replica, cluster string) string {
	return userAgentProduct + " replica=" + replica + " cluster=" + cluster
}

// ParseRemoteUserAgent returns the replica and cluster of a RemoteUserAgent;
// ok is false for any other User-Agent.
func ParseRemoteUserAgent(ua string) (replica, cluster string, ok bool) {
	f := strings.Fields(ua)
	if len(f) != 3 || f[0] != userAgentProduct {
		return "", "", false
	}
	replica, rok := strings.CutPrefix(f[1], "replica=")
	cluster, cok := strings.CutPrefix(f[2], "cluster=")
	return replica, cluster, rok && cok && replica != "" && cluster != ""
}
