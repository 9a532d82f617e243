// Package netproxy is a loopback TCP proxy that stages network faults
// between a client and an API server: a partition that closes connections
// (Cut), and a black hole that keeps them open but stops forwarding (Hold).
package netproxy

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from its loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	held  chan struct{} // closed while bytes flow; open while held
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// New listens on a free loopback port and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{ln: ln, target: target, held: flowing, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(in) {
			_ = in.Close()
			continue
		}
		p.wg.Go(func() { p.serve(in) })
	}
}

// track registers c unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) serve(in net.Conn) {
	defer p.untrack(in)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(out) {
		_ = out.Close()
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, &gatedReader{p: p, r: src})
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done // either side ended: close both (deferred), which ends the other copy
}

// gatedReader holds back what it read while the proxy is held: the bytes
// are delivered late, once it is released, as a network that dropped them
// would deliver them by retransmission after it healed.
type gatedReader struct {
	p *Proxy
	r io.Reader
}

func (g *gatedReader) Read(b []byte) (int, error) {
	n, err := g.r.Read(b)
	g.p.mu.Lock()
	held := g.p.held
	g.p.mu.Unlock()
	<-held
	return n, err
}

// Cut closes every connection and refuses new ones until Heal, as a
// partition that resets connections would.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	p.release() // bytes held back go nowhere now: their connections are closed
}

// Hold stops forwarding without closing anything, as a black hole would:
// connections stay open, new ones are accepted, and no byte passes either
// way until Heal (or Cut, which closes them). A client learns of it only
// from its own timeouts; a server never learns that its client gave up.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.held:
		p.held = make(chan struct{})
	default: // already held
	}
}

// Heal accepts connections again and lets held bytes through.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
	p.release()
}

// release ends a Hold.
func (p *Proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.held:
	default:
		close(p.held)
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
