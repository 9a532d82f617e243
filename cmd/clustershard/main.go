// Command clustershard is the clustershard replica binary. The replica, status
// and demo subcommands are wired in by issue 6; for now it reports its version.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

func main() {
	version := "devel"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		version = info.Main.Version
	}
	if len(os.Args) > 1 && os.Args[1] != "version" {
		fmt.Fprintf(os.Stderr, "clustershard: unknown command %q (only \"version\" exists yet)\n", os.Args[1])
		os.Exit(2)
	}
	fmt.Println("clustershard", version)
}
