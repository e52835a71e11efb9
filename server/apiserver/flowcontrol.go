package apiserver

import (
	"net/http"

	"skiff/server/auth"
)

// FlowControl is API Priority and Fairness: it decides when each request
// runs, after authentication (it classifies by user) and before
// authorization, as upstream's handler chain does.
type FlowControl interface {
	// Admit waits for the request's turn. It may set response headers in
	// h, and returns the function to call when the request is done, or an
	// error (a 429 Status) to answer instead of serving it.
	Admit(r *http.Request, h http.Header, a auth.Attributes) (done func(), err error)
}

func (s *Server) flowControl(next http.Handler) http.Handler {
	fc := s.cfg.FlowControl
	if fc == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done, err := fc.Admit(r, w.Header(), attributes(auth.UserFrom(r.Context()), parseRequest(r)))
		if err != nil {
			writeError(w, r, err)
			return
		}
		defer done()
		next.ServeHTTP(w, r)
	})
}
