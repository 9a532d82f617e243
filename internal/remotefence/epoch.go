package remotefence

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Current returns the epoch of cluster in the remote API server cfg
// reaches, and whether it has one.
func Current(ctx context.Context, cfg *rest.Config, cluster string) (int64, bool, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, false, err
	}
	return current(ctx, kube, cluster)
}

func current(ctx context.Context, kube kubernetes.Interface, cluster string) (int64, bool, error) {
	cm, err := kube.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, ok := cm.Data[cluster]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("epoch %q of cluster %s is not a number", v, cluster)
	}
	return n, true, nil
}

// bump raises the cluster's epoch (creating the ConfigMap if needed). An
// existing key is raised by a JSON patch that first tests its value, so the
// owners of other clusters of the same API server, who write other keys of
// the same ConfigMap at the same time (after a crash, all of a replica's
// clusters move at once), never conflict with it; a new key is added with a
// resourceVersion precondition. Either way a raise of this cluster that
// raced with another is retried on a fresh read.
func bump(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, user authenticationv1.UserInfo, cluster string) (int64, error) {
	for attempt := 0; ; attempt++ {
		cm, err := kube.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
		var cur int64
		v, has := "", false
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ConfigMapName}}
		case err != nil:
			return 0, fmt.Errorf("read the fence epoch: %w", err)
		default:
			if v, has = cm.Data[cluster]; has {
				if cur, err = strconv.ParseInt(v, 10, 64); err != nil || cur < 0 {
					cur = 0 // tampered with: the clock takes over below
				}
			}
		}
		// Never below the clock in milliseconds: an epoch whose ConfigMap or
		// key was deleted starts again above anything an earlier owner holds
		// (owners are a lease duration apart, far more than clock skew).
		next := max(cur+1, time.Now().UnixMilli())
		as, err := kubernetes.NewForConfig(withEpoch(cfg, user, cluster, next))
		if err != nil {
			return 0, err
		}
		cms := as.CoreV1().ConfigMaps(Namespace)
		switch {
		case has:
			var patch []byte
			patch, err = json.Marshal([]map[string]string{
				{"op": "test", "path": "/data/" + cluster, "value": v},
				{"op": "replace", "path": "/data/" + cluster, "value": strconv.FormatInt(next, 10)},
			})
			if err == nil {
				_, err = cms.Patch(ctx, ConfigMapName, types.JSONPatchType, patch, metav1.PatchOptions{})
			}
		case cm.ResourceVersion == "":
			cm.Data = map[string]string{cluster: strconv.FormatInt(next, 10)}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		default:
			cm = cm.DeepCopy()
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[cluster] = strconv.FormatInt(next, 10)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			return next, nil
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "impersonate"):
			return 0, &impersonationError{err: err}
		case (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) && attempt < 20:
			// Another raise won the race (a failed test op is answered
			// Invalid or BadRequest): read again.
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Duration(rand.Int64N(int64(20*time.Millisecond)) + int64(attempt)*int64(10*time.Millisecond))):
			}
			continue
		}
		return 0, fmt.Errorf("raise the fence epoch of %s to %d: %w", cluster, next, err)
	}
}

// awaitEnforced waits until the server refuses a dry-run write of the
// epoch before epoch: its admission has seen the policy, the binding and
// the new epoch.
func awaitEnforced(ctx context.Context, cfg *rest.Config, user authenticationv1.UserInfo, cluster string, epoch int64, wait time.Duration) error {
	old, err := kubernetes.NewForConfig(withEpoch(cfg, user, cluster, epoch-1))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	// One request per look: a dry-run merge patch (an update for admission)
	// needs no read first and never conflicts with raises of other clusters.
	check := []byte(`{"metadata":{"annotations":{"clustershard.io/fence-check":"` + strconv.FormatInt(epoch, 10) + `"}}}`)
	for {
		_, err := old.CoreV1().ConfigMaps(Namespace).Patch(ctx, ConfigMapName, types.MergePatchType, check, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case IsFenced(err) && strings.Contains(err.Error(), movedOn):
			// The validation ran against an epoch above epoch-1.
			return nil
		case err != nil:
			return fmt.Errorf("check the fence: %w", err)
		case time.Now().After(deadline):
			return fmt.Errorf("%w: the remote API server still admits writes of epoch %d %v after the epoch was raised to %d (is the ValidatingAdmissionPolicy admission plugin enabled?)",
				errNotEnforced, epoch-1, wait, epoch)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}
