package remotefence

import (
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// Memo remembers, per remote API server and credentials (Options.Key),
// what a Raise learnt that does not change from one ownership epoch to the
// next: who the kubeconfig's user is, and that the namespace is there. The
// next Raise with the same key skips those two requests (the policy is
// still read: see raiseKnown); when anything fails, it forgets the key and
// raises again from the start. A Memo is safe for concurrent use; the zero
// value is ready.
type Memo struct {
	mu sync.Mutex
	m  map[string]authenticationv1.UserInfo
}

func (m *Memo) get(key string) (authenticationv1.UserInfo, bool) {
	if m == nil || key == "" {
		return authenticationv1.UserInfo{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.m[key]
	return u, ok
}

func (m *Memo) put(key string, u authenticationv1.UserInfo) {
	if m == nil || key == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]authenticationv1.UserInfo{}
	}
	m.m[key] = u
}

// Forget drops what was learnt under key.
func (m *Memo) Forget(key string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}
