package drill

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustershard/clustershard/test/admissionhook"
)

// slowInstalls makes every install of the agent chart take at least d: a
// validating webhook of each remote API server, served by the drill, holds
// the creation of the chart's post-install hook for d. Installs are then on
// their way when replicas start, join and leave, so a hand-over that cuts
// one shows in I3 (a release history other than 1:deployed).
func (r *Runner) slowInstalls(ctx context.Context, d time.Duration) error {
	hook, err := admissionhook.New(func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.DryRun != nil && *req.DryRun {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.hook = hook
	wh := hook.Webhook("agent-hook.drill.clustershard.io", "", admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}, min(d+5*time.Second, 30*time.Second))
	wh.NamespaceSelector = &metav1.LabelSelector{}
	wh.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"clustershard.io/drill-hook": "agent"}}
	for i, c := range r.remotes {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "drill-slow-installs"},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{wh},
		}
		if err := c.Create(ctx, cfg); err != nil {
			return fmt.Errorf("remote %d: the webhook holding the agent chart's hook: %w", i, err)
		}
	}
	return nil
}
