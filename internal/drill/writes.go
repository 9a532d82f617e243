package drill

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/clustershard/clustershard/controllers/remotecluster"
)

// Write is one write request a replica made to a remote API server for one
// cluster, as that server's audit log recorded it: the remote side's own
// account of who wrote, independent of the replicas' journals.
type Write struct {
	Replica, Cluster string
	Verb, Object     string
	// Received and Completed are the API server's times: request received,
	// response complete.
	Received, Completed time.Time
	Code                int32
}

// String describes the write for a report.
func (w Write) String() string {
	return fmt.Sprintf("%s %s by %s for %s [%s, %s] (HTTP %d)", w.Verb, w.Object, w.Replica, w.Cluster,
		w.Received.Format(time.StampMicro), w.Completed.Format(time.StampMicro), w.Code)
}

// ReadAuditWrites reads the writes of replicas (requests with a
// remotecluster.RemoteUserAgent) from a kube-apiserver JSON audit log; a
// missing file has none.
func ReadAuditWrites(path string) ([]Write, error) {
	requests, err := readAudit(path)
	return slices.DeleteFunc(requests, func(w Write) bool { return w.Verb == "get" }), err
}

// readAudit reads every request of replicas that an audit log recorded:
// writes, and the reads its policy records.
func readAudit(path string) ([]Write, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []Write
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rep, cl, ok := remotecluster.ParseRemoteUserAgent(e.UserAgent)
		if !ok || e.Stage != auditv1.StageResponseComplete {
			continue
		}
		w := Write{Replica: rep, Cluster: cl, Verb: e.Verb, Object: e.RequestURI,
			Received: e.RequestReceivedTimestamp.Time, Completed: e.StageTimestamp.Time}
		if e.ObjectRef != nil {
			w.Object = e.ObjectRef.Resource + " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		out = append(out, w)
	}
	return out, sc.Err()
}

// StrayWrites returns the writes that break I1 on the remote side: a write
// (from request received to response complete) during another replica's
// authority over the cluster, or a write received while its own replica had
// no authority over the cluster.
func StrayWrites(writes []Write, intervals []Interval) []string {
	by := map[string][]Interval{}
	for _, iv := range intervals {
		by[iv.Cluster] = append(by[iv.Cluster], iv)
	}
	var out []string
	for _, w := range writes {
		covered := false
		for _, iv := range by[w.Cluster] {
			switch {
			case iv.Replica != w.Replica && w.Completed.After(iv.Start) && w.Received.Before(iv.End):
				out = append(out, fmt.Sprintf("%s: during the authority of %s [%s, %s)", w, iv.Replica,
					iv.Start.Format(time.StampMicro), iv.End.Format(time.StampMicro)))
			case iv.Replica == w.Replica && !w.Received.Before(iv.Start) && w.Received.Before(iv.End):
				covered = true
			}
		}
		if !covered {
			out = append(out, fmt.Sprintf("%s: outside any authority of %s over the cluster", w, w.Replica))
		}
	}
	return out
}
