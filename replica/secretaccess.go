package replica

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// checkSecretAccess fails when the replica may not get, list and watch
// Secrets in one of the namespaces kubeconfig Secrets may live in: its
// cache's Secret informer there would never sync, and every replica would
// fail to start its controllers after the cache sync timeout, the cause only
// in the logs. A typo in the flag, or a namespace without its Role, is
// named at start-up instead.
func checkSecretAccess(ctx context.Context, kube kubernetes.Interface, namespaces []string) error {
	var errs []error
	for _, ns := range namespaces {
		for _, verb := range []string{"get", "list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets"},
			}}
			res, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("check access to the Secrets of namespace %q: %w", ns, err)
			}
			if !res.Status.Allowed {
				errs = append(errs, fmt.Errorf("--kubeconfig-secret-namespaces: this replica may not %s Secrets in namespace %q; grant it a Role there (get, list, watch Secrets) or leave the namespace out", verb, ns))
				break
			}
		}
	}
	return errors.Join(errs...)
}
