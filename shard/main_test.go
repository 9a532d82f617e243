package shard_test

import (
	"os"
	"testing"

	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Remotes: 1}, &env))
}
