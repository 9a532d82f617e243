// Command clustershard is the clustershard replica binary: `run` (the
// default) runs one replica, `status` prints the ownership view, `demo` runs
// the local demonstration.
package main

import (
	"os"

	"github.com/clustershard/clustershard/cmd/clustershard/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
