package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/tools/fleet"
)

// StrictKind is the --replicate-kind of StrictChaos, the example kind shaped
// like Chaos Mesh's chaos kinds (no status subresource, status.experiment
// required, conditions of type/status/reason only).
const StrictKind = "StrictChaos.v1alpha1.example.clustershard.io/strictchaos"

// showMirroring walks one PodChaos-shaped object through what a Chaos Mesh
// user sees: created in the management cluster, copied into its remote
// cluster, status written there by the remote's controller (here the demo,
// with a plain update of the whole object, as chaos-controller-manager
// does), mirrored back onto the source.
func (d *demo) showMirroring(ctx context.Context, cluster, scope string, remote int) error {
	rc, err := client.New(d.cp.Remotes[remote].Config, client.Options{Scheme: fleet.Scheme()})
	if err != nil {
		return err
	}
	src := &examplev1alpha1.StrictChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: scope, Name: "pod-kill"},
		Spec:       examplev1alpha1.StrictChaosSpec{RemoteCluster: cluster, Action: "pod-kill", Duration: "30s"},
	}
	if err := d.c.Create(ctx, src); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(src)
	fmt.Fprintf(d.out, "    created StrictChaos %s with spec.remoteCluster=%s\n", key, cluster)
	var cp examplev1alpha1.StrictChaos
	if err := d.until(ctx, "the copy in "+cluster+" and Synced on the source", func() bool {
		if rc.Get(ctx, key, &cp) != nil || d.c.Get(ctx, key, src) != nil {
			return false
		}
		o, _ := remotecopy.ReadOutcome(src)
		return o.Reason == "Synced"
	}); err != nil {
		return err
	}
	d.printSource(src, "copied")
	cp.Status = examplev1alpha1.StrictChaosStatus{
		Experiment: examplev1alpha1.StrictChaosExperiment{DesiredPhase: "Run", Records: []examplev1alpha1.StrictChaosRecord{{ID: scope + "/web-0", Phase: "Injected"}}},
		Conditions: []examplev1alpha1.StrictChaosCondition{{Type: "Selected", Status: "True"}, {Type: "AllInjected", Status: "True"}},
	}
	if err := rc.Update(ctx, &cp); err != nil {
		return fmt.Errorf("write status on the copy: %w", err)
	}
	fmt.Fprintf(d.out, "    the remote's controller wrote status on the copy (a plain update: the kind has no status subresource)\n")
	if err := d.until(ctx, "the remote status on the source", func() bool {
		return d.c.Get(ctx, key, src) == nil && src.Status.Experiment.DesiredPhase == "Run" && len(src.Status.Conditions) >= 3
	}); err != nil {
		return err
	}
	d.printSource(src, "remote status mirrored")
	return nil
}

// printSource prints what `kubectl get -o yaml` shows of a source's outcome.
func (d *demo) printSource(src *examplev1alpha1.StrictChaos, step string) {
	out, _ := yaml.Marshal(map[string]any{"status": src.Status})
	fmt.Fprintf(d.out, "    %s: the source in the management cluster shows\n", step)
	fmt.Fprintf(d.out, "      annotation %s: %s\n", v1alpha1.OutcomeAnnotation, src.Annotations[v1alpha1.OutcomeAnnotation])
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Fprintf(d.out, "      %s\n", line)
	}
}

// until polls cond every 200 ms for up to a minute.
func (d *demo) until(ctx context.Context, what string, cond func() bool) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
