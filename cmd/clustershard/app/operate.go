package app

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/cmd/clustershard/operate"
	"github.com/clustershard/clustershard/internal/scheme"
)

// operateCommands are cordon, uncordon, drain and move.
func operateCommands() []*cobra.Command {
	o := &options{}
	var timeout time.Duration
	var wait bool
	cordon := &cobra.Command{
		Use:   "cordon REPLICA",
		Short: "Keep a replica out of the ring: it hands its clusters over and takes none until uncordoned (outlives its restarts)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd.Context(), func(ctx context.Context, c client.Client) error {
				if err := operate.Cordon(ctx, c, o.namespace, args[0], who()); err != nil {
					return err
				}
				fmt.Printf("%s cordoned\n", args[0])
				return nil
			})
		},
	}
	uncordon := &cobra.Command{
		Use:   "uncordon REPLICA",
		Short: "Put a cordoned replica back on the ring",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd.Context(), func(ctx context.Context, c client.Client) error {
				if err := operate.Uncordon(ctx, c, o.namespace, args[0]); err != nil {
					return err
				}
				fmt.Printf("%s uncordoned\n", args[0])
				return nil
			})
		},
	}
	drain := &cobra.Command{
		Use:   "drain REPLICA",
		Short: "Cordon a replica and wait until every cluster it owned is handed over",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withClient(cmd.Context(), func(ctx context.Context, c client.Client) error {
				ctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				start, last := time.Now(), -1
				err := operate.Drain(ctx, c, o.namespace, args[0], who(), 500*time.Millisecond, func(held []string) {
					if len(held) != last {
						fmt.Printf("%s cordoned; %d clusters still held\n", args[0], len(held))
						last = len(held)
					}
				})
				if err != nil {
					return err
				}
				fmt.Printf("%s drained in %s: it holds no cluster and stays out of the ring until `clustershard uncordon %s`\n",
					args[0], time.Since(start).Round(100*time.Millisecond), args[0])
				return nil
			})
		},
	}
	drain.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "How long to wait for the hand-overs; the replica stays cordoned when it runs out.")
	var to string
	var unpin bool
	move := &cobra.Command{
		Use:   "move CLUSTER --to REPLICA | --unpin",
		Short: "Hand a RemoteCluster over to a replica and pin it there (spec.placement.replica), or unpin it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (to == "") == !unpin {
				return fmt.Errorf("give either --to REPLICA or --unpin")
			}
			return o.withClient(cmd.Context(), func(ctx context.Context, c client.Client) error {
				if unpin {
					if err := operate.Unpin(ctx, c, args[0]); err != nil {
						return err
					}
					fmt.Printf("%s unpinned: the ring places it\n", args[0])
					return nil
				}
				if err := operate.Move(ctx, c, o.namespace, args[0], to); err != nil {
					return err
				}
				if !wait {
					fmt.Printf("%s pinned to %s\n", args[0], to)
					return nil
				}
				ctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				start := time.Now()
				if err := operate.WaitHeld(ctx, c, o.namespace, args[0], to, 250*time.Millisecond); err != nil {
					return err
				}
				fmt.Printf("%s moved to %s in %s and pinned there (clustershard move %s --unpin to let the ring place it)\n",
					args[0], to, time.Since(start).Round(100*time.Millisecond), args[0])
				return nil
			})
		},
	}
	move.Flags().StringVar(&to, "to", "", "The replica to move the cluster to (its --replica-id); it must be live and not cordoned.")
	move.Flags().BoolVar(&unpin, "unpin", false, "Remove the cluster's pin instead.")
	move.Flags().BoolVar(&wait, "wait", true, "Wait until the replica holds the cluster's Lease.")
	move.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long --wait waits.")
	cmds := []*cobra.Command{cordon, uncordon, drain, move}
	for _, c := range cmds {
		fs := c.Flags()
		fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the management cluster (default: in-cluster, then $KUBECONFIG, then ~/.kube/config).")
		fs.StringVar(&o.namespace, "namespace", defaultNamespace(), "Namespace of the Leases (default $POD_NAMESPACE or clustershard-system).")
	}
	return cmds
}

// withClient runs f with a client of the management cluster.
func (o *options) withClient(ctx context.Context, f func(context.Context, client.Client) error) error {
	if o.namespace == "" {
		return fmt.Errorf("--namespace must not be empty")
	}
	o.kubeQPS, o.kubeBurst = 20, 40
	c, err := o.client()
	if err != nil {
		return err
	}
	return f(ctx, c)
}

// client is a client of the management cluster, with the scheme of every
// kind clustershard reads.
func (o *options) client() (client.Client, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// who names the operator in a cordon mark.
func who() string {
	name := "clustershard"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name += " (" + u.Username + ")"
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += " on " + strings.SplitN(h, ".", 2)[0]
	}
	return name
}
