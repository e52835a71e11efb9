// Command admwebhook is an admission webhook for skiff's e2e tests: it
// serves admission.k8s.io/v1 AdmissionReview over HTTPS on one path per
// behaviour (/allow, /deny, /mutate, /warn, /hang; see review.go), so that
// a test picks the answer by the path its webhook configuration names. The
// certificate comes from files, as a pod mounts a Secret. It is built into
// an image by skiff/e2e/testimages.
package main

import (
	"context"
	"flag"
	"time"

	"skiff/e2e/testimages/tlsserve"
)

// Config is what the webhook serves with.
type Config struct {
	tlsserve.Config
	// HangFor is how long /hang holds a request whose caller stays.
	HangFor time.Duration
}

func main() {
	var cfg Config
	cfg.AddFlags(flag.CommandLine, "/certs", "port", 9443)
	flag.DurationVar(&cfg.HangFor, "hang", 30*time.Second, "how long /hang holds a request")
	flag.Parse()
	cfg.Log = tlsserve.NewLog("admwebhook")
	tlsserve.Main(cfg.Log, func(ctx context.Context) error { return Run(ctx, cfg) })
}

// Run serves until ctx is done, then shuts down gracefully; requests held
// by /hang end with the shutdown rather than wait out HangFor.
func Run(ctx context.Context, cfg Config) error {
	return tlsserve.Run(ctx, cfg.Config, "AdmissionReview", Handler(cfg.HangFor, cfg.Log))
}
