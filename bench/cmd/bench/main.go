// Command bench runs the clustershard benchmarks (`make bench`): it writes
// bench/results/<date>.json, draws bench/plots/*.svg, regenerates
// bench/RESULTS.md and prints the summary.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/bench"
)

func main() {
	// The harness's own controller-runtime logs (envtest) are not the
	// benchmark's output.
	ctrllog.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	binary := flag.String("binary", "bin/clustershard", "The clustershard binary run as replicas.")
	out := flag.String("out", "bench", "Directory of results/, plots/ and RESULTS.md.")
	scenarios := flag.String("scenarios", strings.Join(bench.AllScenarios, ","), "Comma-separated scenarios to run.")
	render := flag.String("render", "", "Only render RESULTS.md and the plots from this results JSON file.")
	update := flag.String("update", "", "Run --scenarios and merge them into this results JSON file (with --why), instead of writing a new one.")
	why := flag.String("why", "", "With --update: why the scenarios were measured again.")
	objects := flag.Int("objects-per-cluster", 20, "Replication: source objects per cluster (100 clusters); 100 (10,000 objects) does not sync within the 10-minute bound with one replica on 2 cores.")
	baseline := flag.Bool("handover-baseline", true, "Hand-over: run the scenario again without the hand-over window, as its baseline.")
	keep := flag.String("keep-dir", "", "Keep the replicas' logs and journals of the (one) scenario run under this empty folder, for a look afterwards.")
	var replicaArgs []string
	flag.Func("replica-arg", "An extra flag of every replica (repeatable), e.g. --replica-arg=--handover-window=4.", func(v string) error {
		replicaArgs = append(replicaArgs, v)
		return nil
	})
	flag.Parse()

	var res *bench.Results
	var jsonPath string
	if *render != "" {
		b, err := os.ReadFile(*render)
		if err != nil {
			return err
		}
		res = &bench.Results{}
		if err := json.Unmarshal(b, res); err != nil {
			return fmt.Errorf("%s: %w", *render, err)
		}
		jsonPath = *render
	} else {
		c := bench.Default(*binary)
		c.Scenarios = strings.Split(*scenarios, ",")
		if *objects < 1 {
			return errors.New("--objects-per-cluster must be positive")
		}
		c.ReplicationObjects = *objects
		c.HandoverBaseline, c.ReplicaArgs, c.Dir = *baseline, replicaArgs, *keep
		c.ProfileDir = filepath.Join(*out, "profiles")
		for _, s := range c.Scenarios {
			if !slices.Contains(bench.AllScenarios, s) {
				return fmt.Errorf("unknown scenario %q (known: %v)", s, bench.AllScenarios)
			}
		}
		if _, err := os.Stat(*binary); err != nil {
			return fmt.Errorf("--binary: %w (build it with make build)", err)
		}
		c.Out = os.Stdout
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res = bench.Run(ctx, c)
		if err := os.MkdirAll(filepath.Join(*out, "results"), 0o750); err != nil {
			return err
		}
		jsonPath = filepath.Join(*out, "results", res.Date.Format("2006-01-02")+".json")
		if *update != "" {
			if *why == "" {
				return errors.New("--update needs --why")
			}
			b, err := os.ReadFile(*update)
			if err != nil {
				return err
			}
			base := &bench.Results{}
			if err := json.Unmarshal(b, base); err != nil {
				return fmt.Errorf("%s: %w", *update, err)
			}
			base.Merge(res, c.Scenarios, *why)
			res, jsonPath = base, *update
		}
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil { //nolint:gosec // results are meant to be read
			return err
		}
	}
	plotDir := filepath.Join(*out, "plots")
	if err := os.MkdirAll(plotDir, 0o750); err != nil {
		return err
	}
	plots, err := bench.Plots(res, plotDir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(*out, jsonPath)
	if err != nil {
		rel = jsonPath
	}
	md := bench.Markdown(res, plots, rel)
	if err := os.WriteFile(filepath.Join(*out, "RESULTS.md"), []byte(md), 0o644); err != nil { //nolint:gosec // meant to be read
		return err
	}
	fmt.Println()
	fmt.Print(md)
	if len(res.Errors) > 0 {
		return errors.New("some scenarios did not complete: " + strings.Join(res.Errors, "; "))
	}
	return nil
}
