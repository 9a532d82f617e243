package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultSecretKey is the Secret data key the harness writes kubeconfigs under.
const DefaultSecretKey = "kubeconfig"

// WriteKubeConfigSecret creates or updates Secret namespace/name in the cluster
// behind c with kubeconfig under key, creating the namespace when missing.
func WriteKubeConfigSecret(ctx context.Context, c client.Client, namespace, name, key string, kubeconfig []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := c.Get(ctx, client.ObjectKeyFromObject(secret), secret)
	switch {
	case apierrors.IsNotFound(err):
		secret.Data = map[string][]byte{key: kubeconfig}
		err = c.Create(ctx, secret)
	case err == nil:
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[key] = kubeconfig
		err = c.Update(ctx, secret)
	}
	if err != nil {
		return fmt.Errorf("write kubeconfig Secret %s/%s: %w", namespace, name, err)
	}
	return nil
}
