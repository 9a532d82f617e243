package drill

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/internal/remotefence"
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
	// Epoch is the ownership epoch the write carried (remotefence), 0 if
	// none; Fenced says the remote API server refused it for an earlier
	// epoch; DryRun that it was a dry run. Neither stored anything.
	Epoch          int64
	Fenced, DryRun bool
}

// stored says whether the write may have changed anything.
func (w Write) stored() bool { return !w.Fenced && !w.DryRun }

// raisedEpochs returns, per cluster, the writes that raised its epoch.
func raisedEpochs(writes []Write) map[string][]Write {
	raised := map[string][]Write{}
	for _, w := range writes {
		if w.raisedEpoch() {
			raised[w.Cluster] = append(raised[w.Cluster], w)
		}
	}
	return raised
}

// succeeded says whether the server answered the write with success.
func (w Write) succeeded() bool { return w.Code >= 200 && w.Code < 300 }

// raisedEpoch says whether the write raised its cluster's epoch.
func (w Write) raisedEpoch() bool {
	return w.stored() && w.Epoch > 0 && w.Object == "configmaps "+remotefence.Namespace+"/"+remotefence.ConfigMapName &&
		(w.Code == 200 || w.Code == 201)
}

// String describes the write for a report.
func (w Write) String() string {
	epoch := ""
	if w.Epoch > 0 {
		epoch = fmt.Sprintf(" epoch %d", w.Epoch)
	}
	return fmt.Sprintf("%s %s by %s for %s%s [%s, %s] (HTTP %d)", w.Verb, w.Object, w.Replica, w.Cluster, epoch,
		w.Received.Format(time.StampMicro), w.Completed.Format(time.StampMicro), w.Code)
}

// ReadAuditWrites reads the writes of replicas (requests with a
// remote.UserAgent) from a kube-apiserver JSON audit log; a
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
		rep, cl, ok := remote.ParseUserAgent(e.UserAgent)
		if !ok || e.Stage != auditv1.StageResponseComplete {
			continue
		}
		w := Write{Replica: rep, Cluster: cl, Verb: e.Verb, Object: e.RequestURI,
			Received: e.RequestReceivedTimestamp.Time, Completed: e.StageTimestamp.Time}
		if e.ObjectRef != nil {
			w.Object = e.ObjectRef.Resource + " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
			if e.ObjectRef.APIGroup == "authentication.k8s.io" || e.ObjectRef.APIGroup == "authorization.k8s.io" {
				continue // a review: a question, nothing stored
			}
		}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		if u := e.ImpersonatedUser; u != nil {
			if v := u.Extra[remotefence.ExtraKey]; len(v) == 1 {
				w.Epoch, _ = strconv.ParseInt(v[0], 10, 64)
			}
		}
		w.Fenced = e.ResponseStatus != nil && e.ResponseStatus.Code == 403 && remotefence.IsFenced(errors.New(e.ResponseStatus.Message))
		if u, err := url.Parse(e.RequestURI); err == nil {
			w.DryRun = u.Query().Get("dryRun") != ""
		}
		out = append(out, w)
	}
	return out, sc.Err()
}

// StrayWrites returns the writes that break I1 on the remote side. Writes
// that stored nothing (refused by the remote fence, dry runs) are not
// writes. A write that carries an ownership epoch is judged by the remote
// API server's own order of epochs: it must have ended before a later epoch
// was raised in its cluster (received before, it was admitted under its
// own epoch; once the next owner raised it, nothing of the earlier epochs
// can be admitted, which is what closes the window of a write held on the
// way and delivered late). Any other write is judged by the Leases: one
// (from request received to response complete) during another replica's
// authority over the cluster, or one received while its own replica had no
// authority over the cluster, breaks I1.
func StrayWrites(writes []Write, intervals []Interval) []string {
	by := map[string][]Interval{}
	for _, iv := range intervals {
		by[iv.Cluster] = append(by[iv.Cluster], iv)
	}
	raised := raisedEpochs(writes)
	// verified[cluster][e]: when the server first refused a dry run of
	// epoch e-1, after e was raised: from then on its admission refuses
	// every write of an earlier epoch.
	verified := map[string]map[int64]time.Time{}
	for _, w := range writes {
		switch {
		case w.DryRun && w.Fenced:
			if verified[w.Cluster] == nil {
				verified[w.Cluster] = map[int64]time.Time{}
			}
			if at, ok := verified[w.Cluster][w.Epoch+1]; !ok || w.Completed.Before(at) {
				verified[w.Cluster][w.Epoch+1] = w.Completed
			}
		}
	}
	var out []string
	for _, w := range writes {
		if !w.stored() {
			continue
		}
		if w.Epoch > 0 {
			if refusedByAdmission(w, raised[w.Cluster], verified[w.Cluster]) {
				continue
			}
			for _, b := range raised[w.Cluster] {
				if b.Epoch <= w.Epoch || !w.Completed.After(b.Received) {
					continue
				}
				out = append(out, fmt.Sprintf("%s: epoch %d still being written after %s raised epoch %d at %s", w, w.Epoch, b.Replica, b.Epoch,
					b.Received.Format(time.StampMicro)))
				break
			}
			continue
		}
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

// refusedByAdmission says whether write w stored nothing because admission
// refused its epoch: it did not succeed, and the server had already refused
// a dry run of an epoch at least as high as w's before w was received, after
// a raise above it (its answer may still say 504: a client cancellation that
// came with it ends the response first). Refused once, it is refused for
// every later raise too, so no later raise may report it.
func refusedByAdmission(w Write, raised []Write, verified map[int64]time.Time) bool {
	if w.succeeded() {
		return false
	}
	for _, b := range raised {
		if v, ok := verified[b.Epoch]; ok && b.Epoch > w.Epoch && w.Received.After(v) {
			return true
		}
	}
	return false
}
