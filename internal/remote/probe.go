package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// Probe asks a remote API server for /version, bounded by timeout, and
// returns its version and how long the answer took.
func Probe(ctx context.Context, rc rest.Interface, timeout time.Duration) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	body, err := rc.Get().AbsPath("/version").Do(ctx).Raw()
	latency := time.Since(start)
	if err != nil {
		return "", latency, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return "", latency, fmt.Errorf("decode /version: %w", err)
	}
	return info.GitVersion, latency, nil
}
