package apiserver

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// backendProxy forwards one proxy-subresource request to location with
// the semantics of upstream's UpgradeAwareHandler with a wrapped
// transport: upgrades pass through untouched; an empty path is redirected
// to ".../proxy/"; redirects and HTML links that point at the backend
// itself are rewritten to go through the API server's proxy path, so a
// web page served by a pod works when browsed through the API server.
type backendProxy struct {
	location  *url.URL // scheme, host and path; the request's query is added
	transport http.RoundTripper
	log       *slog.Logger
}

// backendFlushInterval is upstream's default: streamed responses (no
// length, or text/event-stream) are flushed at once regardless.
const backendFlushInterval = 200 * time.Millisecond

func (p *backendProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	upgrade := isUpgradeRequest(r)
	loc := *p.location
	loc.RawQuery = r.URL.RawQuery
	if !strings.HasSuffix(loc.Path, "/") && strings.HasSuffix(r.URL.Path, "/") {
		loc.Path += "/"
	}
	// As upstream (issue 4958): relative links of a page served at the
	// backend's root only resolve below .../proxy/.
	if !upgrade && loc.Path == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		target := r.URL.Path + "/"
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", target)
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	rw := &linkRewriter{prepend: proxyPrefix(r.URL.Path, p.location.Path)}
	rp := &httputil.ReverseProxy{
		Transport:     p.transport,
		FlushInterval: backendFlushInterval,
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := loc
			pr.Out.URL = &u
			scrubCredentials(pr.Out.Header)
			setForwardedFor(pr.Out, pr.In)
			if !upgrade {
				pr.Out.Header.Set("X-Forwarded-Uri", rw.forwardedURI(pr.Out.URL))
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil
			}
			for _, h := range []string{"Access-Control-Allow-Credentials", "Access-Control-Allow-Headers", "Access-Control-Allow-Methods", "Access-Control-Allow-Origin"} {
				resp.Header.Del(h)
			}
			return rw.rewriteResponse(resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				p.log.Debug("proxy backend unreachable", "url", loc.Redacted(), "err", err)
				err = apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err))
			}
			writeError(w, r, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// proxyPrefix is the API path in front of the backend path: the request
// path less the backend location's path.
func proxyPrefix(reqPath, locPath string) string {
	suffix := locPath
	if strings.HasSuffix(reqPath, "/") && !strings.HasSuffix(suffix, "/") {
		suffix += "/"
	}
	return strings.TrimSuffix(reqPath, suffix)
}

func isUpgradeRequest(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// scrubCredentials removes what authenticated the client to the API
// server: kube-apiserver drops the Authorization header once a request is
// authenticated, and impersonation and request-header identities are
// meaningless to a backend.
func scrubCredentials(h http.Header) {
	for k := range h {
		lk := strings.ToLower(k)
		if lk == "authorization" || strings.HasPrefix(lk, "impersonate-") || strings.HasPrefix(lk, "x-remote-") {
			h.Del(k)
		}
	}
}

// setForwardedFor appends the client's address to X-Forwarded-For as
// upstream's proxy does (ReverseProxy's Rewrite mode drops the header).
func setForwardedFor(out, in *http.Request) {
	host, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		return
	}
	if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 {
		host = strings.Join(prior, ", ") + ", " + host
	}
	out.Header.Set("X-Forwarded-For", host)
}

// linkRewriter rewrites URLs of a backend's response to go through the
// proxy prefix (upstream's proxy Transport with empty Scheme and Host,
// which is what the API server's own requests give it).
type linkRewriter struct {
	prepend string
}

func (lr *linkRewriter) forwardedURI(u *url.URL) string {
	uri := path.Join(lr.prepend, u.EscapedPath())
	if strings.HasSuffix(u.Path, "/") {
		uri += "/"
	}
	return uri
}

func (lr *linkRewriter) rewriteResponse(resp *http.Response) error {
	req := resp.Request
	if redirect := resp.Header.Get("Location"); redirect != "" {
		target, err := url.Parse(redirect)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("error trying to parse Location header: %w", err))
		}
		resp.Header.Set("Location", lr.rewriteURL(target, req.URL, req.Host))
		return nil
	}
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if strings.TrimSpace(ct) != "text/html" {
		return nil
	}
	return lr.rewriteHTMLBody(resp)
}

// rewriteURL makes a link the backend gave for itself (a path, or an
// absolute URL naming the backend or the host the client asked for) point
// below the proxy prefix; links elsewhere and relative ones are kept.
func (lr *linkRewriter) rewriteURL(u *url.URL, backend *url.URL, requestHost string) string {
	differentHost := u.Host != "" && u.Host != backend.Host && u.Host != requestHost
	if differentHost || !strings.HasPrefix(u.Path, "/") {
		return u.String()
	}
	if u.Host != requestHost {
		u.Scheme, u.Host = "", ""
	}
	if strings.HasPrefix(u.Path, lr.prepend) {
		return u.String()
	}
	orig := u.Path
	u.Path = path.Join(lr.prepend, u.Path)
	if strings.HasSuffix(orig, "/") {
		u.Path += "/"
	}
	return u.String()
}

// htmlURLAttrs are the URL-valued attributes of each tag (upstream's
// table, from the HTML 4 and 5 attribute indexes).
var htmlURLAttrs = map[atom.Atom][]string{
	atom.A: {"href"}, atom.Applet: {"codebase"}, atom.Area: {"href"}, atom.Audio: {"src"},
	atom.Base: {"href"}, atom.Blockquote: {"cite"}, atom.Body: {"background"}, atom.Button: {"formaction"},
	atom.Command: {"icon"}, atom.Del: {"cite"}, atom.Embed: {"src"}, atom.Form: {"action"},
	atom.Frame: {"longdesc", "src"}, atom.Head: {"profile"}, atom.Html: {"manifest"},
	atom.Iframe: {"longdesc", "src"}, atom.Img: {"longdesc", "src", "usemap"},
	atom.Input: {"src", "usemap", "formaction"}, atom.Ins: {"cite"}, atom.Link: {"href"},
	atom.Object: {"classid", "codebase", "data", "usemap"}, atom.Q: {"cite"}, atom.Script: {"src"},
	atom.Source: {"src"}, atom.Video: {"poster", "src"},
}

// rewriteHTMLBody rewrites the links of an HTML response, decoding and
// re-encoding gzip or deflate bodies; other encodings pass untouched.
func (lr *linkRewriter) rewriteHTMLBody(resp *http.Response) error {
	enc := resp.Header.Get("Content-Encoding")
	if enc != "" && enc != "gzip" && enc != "deflate" {
		return nil
	}
	orig := resp.Body
	defer orig.Close()
	var in io.Reader = orig
	var buf bytes.Buffer
	var out io.WriteCloser
	switch enc {
	case "gzip":
		zr, err := gzip.NewReader(orig)
		if err != nil {
			return fmt.Errorf("read the gzip HTML response: %w", err)
		}
		in, out = zr, gzip.NewWriter(&buf)
	case "deflate":
		fw, _ := flate.NewWriter(&buf, flate.BestCompression)
		in, out = flate.NewReader(orig), fw
	default:
		out = nopWriteCloser{&buf}
	}
	req := resp.Request
	err := rewriteHTML(in, out, func(u *url.URL) string { return lr.rewriteURL(u, req.URL, req.Host) })
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rewrite the links of the HTML response: %w", err)
	}
	resp.Body = io.NopCloser(&buf)
	resp.Header.Del("Content-Length")
	resp.ContentLength = int64(buf.Len())
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// rewriteHTML copies HTML from r to w with every URL-valued attribute
// passed through rewrite; unparsable URLs are kept.
func rewriteHTML(r io.Reader, w io.Writer, rewrite func(*url.URL) string) error {
	z := html.NewTokenizer(r)
	for {
		tt := z.Next()
		var err error
		switch tt {
		case html.ErrorToken:
			if z.Err() == io.EOF {
				return nil
			}
			return z.Err()
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if attrs, ok := htmlURLAttrs[tok.DataAtom]; ok {
				for i, a := range tok.Attr {
					if !contains(attrs, a.Key) {
						continue
					}
					if u, perr := url.Parse(a.Val); perr == nil {
						tok.Attr[i].Val = rewrite(u)
					}
				}
			}
			_, err = io.WriteString(w, tok.String())
		default:
			_, err = w.Write(z.Raw())
		}
		if err != nil {
			return err
		}
	}
}
