package app

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/clustershard/clustershard/shard"
)

// openJournal opens the ownership journal file for appending; each entry is
// one JSON line written by one write call, so it survives a SIGKILL of the
// process right after. An empty path disables the journal.
func openJournal(path string) (func(shard.JournalEntry), func(), error) {
	if path == "" {
		return nil, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("--ownership-journal: %w", err)
	}
	var mu sync.Mutex
	write := func(e shard.JournalEntry) {
		line, err := json.Marshal(e)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = f.Write(append(line, '\n'))
	}
	return write, func() { _ = f.Close() }, nil
}
