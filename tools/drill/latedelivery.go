package drill

import (
	"context"
	"fmt"
	"time"

	"github.com/clustershard/clustershard/internal/remotefence"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/localcluster"
)

// lateDeliveryFault delivers the victim's remote writes after the next
// owners wrote. The connections the victim has open to its clusters (their
// kubeconfigs lead through proxies of the runner) are armed to stop
// forwarding at the first request with a body (a write), every source
// changes, and the write that triggers it and whatever the victim sends
// next on those connections stay on the way. Then its management path is
// held too and it loses its clusters. The others connect anew, so they take
// the clusters over, raise their epochs and write while the victim's writes
// are still held; those arrive after the heal, sent in time by a replica
// that has long lost the cluster. The remote API servers must refuse them
// (the ownership epoch), which I1 checks; the note says how many were
// delivered late and how each ended.
func lateDeliveryFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, remotes, restore, err := r.victimBehindProxies(ctx, res)
	defer restore()
	if err != nil {
		return err
	}
	heal := func() {
		r.proxies[victim].Heal()
		for _, p := range remotes {
			p.Heal()
		}
	}
	defer heal()
	trigger := make(chan struct{}, len(remotes))
	for _, p := range remotes {
		ch := p.HoldAtWrite(writeChunk)
		go func() {
			select {
			case <-ch:
				trigger <- struct{}{}
			case <-ctx.Done():
			}
		}()
	}
	if err := r.bumpObjects(ctx, fmt.Sprintf("%ds", 300+len(r.reps.all))); err != nil {
		return err
	}
	select {
	case <-trigger:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s sent no write to its clusters within 30s of the sources' change", victim)
	}
	at := time.Now()
	for _, p := range remotes {
		p.HoldExisting()
	}
	r.proxies[victim].Hold()
	r.moved(ctx, res, "", owned, at, r.crashBound())
	time.Sleep(2 * time.Second) // the new owners write meanwhile
	heal()
	// What was held lands (what followed it, netproxy.TrailDelay later).
	var late string
	var n int
	var epochs bool
	for deadline := time.Now().Add(10 * time.Second); ; {
		if late, n, epochs, err = r.lateWrites(victim, owned, at); err != nil {
			return err
		}
		if n > 0 || !epochs || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	res.Notes = append(res.Notes, late)
	if n == 0 && epochs {
		// The replicas raise epochs, yet no held write reached the
		// remote's admission under a superseded one: the fault was not
		// staged, the scenario proved nothing.
		return fmt.Errorf("not staged: %s", late)
	}
	return nil
}

// writeChunk is the least size of what a client sends in one piece that
// lateDeliveryFault takes for a request with a body: more than a read's
// headers on a warm HTTP/2 connection, less than an apply of a copy.
const writeChunk = 400

// lateWrites describes the remote writes of replica id to clusters,
// received since since, whose epoch another owner had already superseded
// when they arrived.
// It also counts those the server decided on (its admission refused them
// or it answered them; not those that timed out or were cancelled before),
// and says whether the clusters raised any epoch.
func (r *Runner) lateWrites(id string, clusters []string, since time.Time) (string, int, bool, error) {
	of := map[string]bool{}
	for _, c := range clusters {
		of[c] = true
	}
	byCode := map[string]int{}
	n, decided, epochs := 0, 0, false
	for _, rc := range r.cp.Remotes {
		writes, err := ReadAuditWrites(localcluster.AuditLogPath(r.dir, rc.Name))
		if err != nil {
			return "", 0, false, err
		}
		raised := raisedEpochs(writes)
		for c := range raised {
			epochs = epochs || of[c]
		}
		for _, w := range writes {
			if shard.HolderName(w.Replica) != id || !of[w.Cluster] || w.Received.Before(since) || w.Epoch == 0 || w.DryRun {
				continue
			}
			for _, b := range raised[w.Cluster] {
				if b.Epoch > w.Epoch && b.Received.Before(w.Received) {
					n++
					switch {
					case w.Fenced:
						decided++
						byCode["refused by the remote fence"]++
					default:
						if w.Code < 500 {
							decided++
						}
						byCode[fmt.Sprintf("HTTP %d", w.Code)]++
					}
					break
				}
			}
		}
	}
	if n == 0 {
		return "no write of the victim was delivered under an epoch another owner had superseded", 0, epochs, nil
	}
	return fmt.Sprintf("%d writes of the victim delivered after the next owner raised the epoch (policy %s): %v", n, remotefence.Policy, byCode), decided, epochs, nil
}
