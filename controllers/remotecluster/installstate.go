package remotecluster

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// installed is the spec.install last ensured for a running manager, when,
// and what it recorded in status: re-applied by later reconciles, so a status
// write that failed (a conflict) does not lose it.
type installed struct {
	key       string
	at        time.Time
	condition metav1.Condition
	helm      *v1alpha1.HelmReleaseStatus
}

// installKey identifies what spec.install asks for, with the kubeconfig.
func installKey(rc *v1alpha1.RemoteCluster, kubeconfigHash string) string {
	b, _ := json.Marshal(rc.Spec.Install)
	return kubeconfigHash + "/" + string(b)
}

// installDue says, for a running manager, whether spec.install changed since
// it was last ensured, or else whether the Helm release's periodic check (one
// resync after the last) is due.
func (r *Reconciler) installDue(rc *v1alpha1.RemoteCluster, key string) (changed, helmDue bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	got, ok := r.installed[rc.Name]
	if !ok || got.key != key {
		return true, false
	}
	return false, rc.Spec.Install != nil && rc.Spec.Install.Helm != nil && time.Since(got.at) >= r.resync()
}

// setInstalled remembers that spec.install (key) was ensured, with the
// Installed condition and status.helm it produced.
func (r *Reconciler) setInstalled(rc *v1alpha1.RemoteCluster, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.installed == nil {
		r.installed = map[string]installed{}
	}
	st := installed{key: key, at: time.Now(), helm: rc.Status.Helm.DeepCopy()}
	if c := meta.FindStatusCondition(rc.Status.Conditions, v1alpha1.ConditionInstalled); c != nil {
		st.condition = *c
	}
	r.installed[rc.Name] = st
}

// restoreInstalled writes the remembered outcome of the last install into
// rc's status.
func (r *Reconciler) restoreInstalled(rc *v1alpha1.RemoteCluster) {
	r.mu.Lock()
	st, ok := r.installed[rc.Name]
	r.mu.Unlock()
	if !ok || st.condition.Type == "" {
		return
	}
	rc.Status.Helm = st.helm.DeepCopy()
	r.setCondition(rc, v1alpha1.ConditionInstalled, st.condition.Status == metav1.ConditionTrue, st.condition.Reason, st.condition.Message)
}
