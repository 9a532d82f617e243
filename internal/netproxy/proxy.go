// Package netproxy is a loopback TCP proxy that stages network faults
// between a client and an API server: a partition that closes connections
// (Cut), and a black hole that keeps them open but stops forwarding (Hold),
// for every connection or for those open at the time (HoldExisting).
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
	// gen numbers the connections served; those up to oldGen wait on
	// oldHeld (HoldExisting).
	gen, oldGen uint64
	oldHeld     chan struct{}
	flowing     chan struct{} // always closed
	// armed, when above zero, is the size of the client's chunk that
	// triggers HoldExisting (HoldAtWrite); triggered is closed then.
	armed     int
	armedGen  uint64 // only connections open when armed trigger it
	triggered chan struct{}
	wg        sync.WaitGroup
}

// New listens on a free loopback port and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{ln: ln, target: target, held: flowing, oldHeld: flowing, flowing: flowing, conns: map[net.Conn]struct{}{}}
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
	p.mu.Lock()
	p.gen++
	gen := p.gen
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, &gatedReader{p: p, r: src, gen: gen})
		done <- struct{}{}
	}
	go func() {
		_, _ = io.Copy(out, &gatedReader{p: p, r: in, gen: gen, fromClient: true})
		done <- struct{}{}
	}()
	go pipe(in, out)
	<-done // either side ended: close both (deferred), which ends the other copy
}

// gatedReader holds back what it read while the proxy is held: the bytes
// are delivered late, once it is released, as a network that dropped them
// would deliver them by retransmission after it healed.
type gatedReader struct {
	p          *Proxy
	r          io.Reader
	gen        uint64
	fromClient bool
}

func (g *gatedReader) Read(b []byte) (int, error) {
	n, err := g.r.Read(b)
	g.p.mu.Lock()
	if g.fromClient && g.p.armed > 0 && n >= g.p.armed && g.gen <= g.p.armedGen {
		g.p.armed = 0
		g.p.holdExisting()
		close(g.p.triggered)
	}
	held, old := g.p.held, g.p.flowing
	if g.gen <= g.p.oldGen {
		old = g.p.oldHeld
	}
	g.p.mu.Unlock()
	<-held
	<-old
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

// HoldExisting holds the connections open now, as Hold does, while new
// ones flow: a path that stalled for the traffic on it, which clients that
// connect anew get around (another process, or a reconnect). What was
// sent on a held connection arrives after Heal, late, while others went on.
func (p *Proxy) HoldExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdExisting()
}

// HoldAtWrite arms a HoldExisting that the first chunk of at least size
// bytes a client sends on a connection open now triggers, that chunk held
// too: with TLS the proxy cannot read requests, but a request with a body
// (a write) is larger than one without (and a connection open now is past
// its TLS handshake). The returned channel is closed once it triggered.
func (p *Proxy) HoldAtWrite(size int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.armedGen = size, p.gen
	p.triggered = make(chan struct{})
	return p.triggered
}

func (p *Proxy) holdExisting() {
	p.oldGen = p.gen
	select {
	case <-p.oldHeld:
		p.oldHeld = make(chan struct{})
	default: // already held
	}
}

// Heal accepts connections again and lets held bytes through.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.armed = 0
	p.mu.Unlock()
	p.release()
}

// release ends a Hold and a HoldExisting.
func (p *Proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range []chan struct{}{p.held, p.oldHeld} {
		select {
		case <-ch:
		default:
			close(ch)
		}
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
