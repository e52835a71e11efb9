package webhook

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// transportCacheSize bounds the cached transports, as upstream's client
// manager bounds its clients.
const transportCacheSize = 200

// Client calls webhooks. It is safe for concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	lru    *list.List // of *hook, most recently used first
	byKey  map[string]*list.Element
	dialer net.Dialer
}

// hook is the cached way to one webhook configuration: its transport
// keeps connections (and TLS sessions) across calls.
type hook struct {
	key    string
	base   url.URL
	client *http.Client
	tr     *http.Transport
}

// New makes a Client.
func New(cfg Config) *Client {
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, log: log, lru: list.New(), byKey: map[string]*list.Element{}}
}

// Do POSTs request as JSON to the webhook cc and decodes its JSON answer
// into response, within timeout (none if 0) and ctx. Errors are *Error.
func (c *Client) Do(ctx context.Context, cc ClientConfig, timeout time.Duration, request, response any) error {
	h, err := c.hook(cc)
	if err != nil {
		return err
	}
	body, err := json.Marshal(request)
	if err != nil {
		return fmt.Errorf("encoding the webhook request: %w", err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	u := h.base
	if deadline, ok := ctx.Deadline(); ok {
		// Tell the webhook how long it has, in whole seconds rounded up,
		// as upstream's dispatcher does.
		if left := time.Until(deadline); left > 0 {
			if t := left.Truncate(time.Second); t != left {
				left = t + time.Second
			}
			q := u.Query()
			q.Set("timeout", left.String())
			u.RawQuery = q.Encode()
		}
	}
	target := u.String()
	err = c.post(ctx, h, target, body, response)
	if err != nil {
		c.log.Debug("webhook call failed", "url", target, "err", err)
	}
	return err
}

func (c *Client) post(ctx context.Context, h *hook, target string, body []byte, response any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return &Error{Kind: ErrInvalidConfig, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return connectionError(target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return connectionError(target, err)
	}
	if int64(len(data)) > c.cfg.MaxResponseBytes {
		return &Error{Kind: ErrUndecodable, URL: target, Err: fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, c.cfg.MaxResponseBytes)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError(target, resp.StatusCode, data)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Kind: ErrUndecodable, URL: target, Err: errors.New("empty response")}
	}
	if err := json.Unmarshal(data, response); err != nil {
		return &Error{Kind: ErrUndecodable, URL: target, Err: err}
	}
	return nil
}

// statusError keeps the metav1.Status the webhook answered with, if any,
// so a caller can return it as upstream's REST client does.
func statusError(target string, code int, data []byte) *Error {
	e := &Error{Kind: ErrStatus, URL: target, StatusCode: code}
	var st metav1.Status
	if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
		e.Status = &st
		e.Err = errors.New(st.Message)
		return e
	}
	const snippet = 256
	text := strings.TrimSpace(string(data))
	if len(text) > snippet {
		text = text[:snippet] + "..."
	}
	if text == "" {
		text = "no further details"
	}
	e.Err = errors.New(text)
	return e
}

// CloseIdleConnections closes the cached transports' idle connections.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; el = el.Next() {
		el.Value.(*hook).tr.CloseIdleConnections()
	}
}

// hook returns the cached transport for cc, making it on first use.
func (c *Client) hook(cc ClientConfig) (*hook, error) {
	k, err := json.Marshal(cc)
	if err != nil {
		return nil, &Error{Kind: ErrInvalidConfig, Err: err}
	}
	key := string(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*hook), nil
	}
	h, err := c.newHook(cc)
	if err != nil {
		return nil, err
	}
	h.key = key
	c.byKey[key] = c.lru.PushFront(h)
	if c.lru.Len() > transportCacheSize {
		old := c.lru.Remove(c.lru.Back()).(*hook)
		delete(c.byKey, old.key)
		old.tr.CloseIdleConnections()
	}
	return h, nil
}

func (c *Client) newHook(cc ClientConfig) (*hook, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cc.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cc.CABundle) {
			return nil, &Error{Kind: ErrInvalidConfig, Err: errors.New("caBundle holds no PEM certificate")}
		}
		tlsCfg.RootCAs = pool
	}
	dial := c.cfg.DialContext
	if dial == nil {
		dial = c.dialer.DialContext
	}
	h := &hook{}
	h2 := false
	switch {
	case cc.Service != nil:
		s := *cc.Service
		if s.Name == "" || s.Namespace == "" {
			return nil, &Error{Kind: ErrInvalidConfig, Err: errors.New("service reference needs a namespace and a name")}
		}
		if c.cfg.Resolver == nil {
			return nil, &Error{Kind: ErrInvalidConfig, Err: errors.New("this server cannot resolve webhook services")}
		}
		path := s.Path
		if path != "" && !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		h.base = url.URL{Scheme: "https", Host: s.hostPort(), Path: path}
		tlsCfg.ServerName = s.serverName()
		// The request goes to the Service's name, and the dialer sends
		// each new connection to a ready endpoint of it: the API server
		// reaches pod addresses directly, with no Service datapath.
		next, host, resolver := dial, h.base.Host, c.cfg.Resolver
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == host {
				ep, err := resolver.ResolveService(ctx, s.Namespace, s.Name, s.port())
				if err != nil {
					return nil, err
				}
				addr = ep
			}
			return next(ctx, network, addr)
		}
	case cc.URL != "":
		u, err := url.Parse(cc.URL)
		if err != nil {
			return nil, &Error{Kind: ErrInvalidConfig, Err: fmt.Errorf("unparsable URL: %w", err)}
		}
		if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, &Error{Kind: ErrInvalidConfig, Err: fmt.Errorf("URL %q is not https://host[/path]", cc.URL)}
		}
		h.base = *u
		h.base.Fragment, h.base.User = "", nil
		// Upstream speaks http/1.1 to remote webhooks so that concurrent
		// calls spread over connections (and a load balancer's
		// backends), and allows http/2 to a local one.
		h2 = isLocalHost(u)
	default:
		return nil, &Error{Kind: ErrInvalidConfig, Err: errors.New("webhook configuration must have either service or URL")}
	}
	h.tr = &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   h2,
	}
	h.client = &http.Client{
		Transport: h.tr,
		// A redirect is the webhook's error: following it would send the
		// request (and its objects) somewhere the configuration does not name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return h, nil
}

func isLocalHost(u *url.URL) bool {
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
