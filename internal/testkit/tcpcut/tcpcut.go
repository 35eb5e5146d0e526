// Package tcpcut is a loopback TCP proxy for tests whose connections can be
// cut: a dropped connection in the middle of a stream, as a flaky network,
// a balancer or a client's own restart makes one, with the server behind it
// still up.
package tcpcut

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards every connection it accepts on 127.0.0.1 to its target.
type Proxy struct {
	lis    net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]net.Conn // accepted → upstream
	closed  bool
	refused bool // connections accepted are closed at once
	wg      sync.WaitGroup
}

// Start listens on a loopback port and forwards to target (host:port).
func Start(target string) (*Proxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{lis: lis, target: target, conns: map[net.Conn]net.Conn{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Cut closes every connection open now, both ways, and returns how many
// there were. New connections are accepted and forwarded as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, up := range p.conns {
		_ = c.Close()
		_ = up.Close()
	}
	return len(p.conns)
}

// Refuse cuts every connection open now and, until Refuse(false), closes
// each one it accepts before forwarding it: the server behind the proxy
// is out of its clients' reach while it is up and serving others.
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	p.refused = refuse
	p.mu.Unlock()
	if refuse {
		p.Cut()
	}
}

// Close stops listening, cuts every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.lis.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		if p.refused {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c] = up
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up, c)
		go p.pipe(up, c, c)
	}
}

// pipe copies from src to dst; when either ends, both close and the
// connection accepted as key is forgotten.
func (p *Proxy) pipe(dst, src, key net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, key)
	p.mu.Unlock()
}
