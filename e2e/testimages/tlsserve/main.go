package tlsserve

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
)

// NewLog is the log of the program name: stderr, each line prefixed
// "name: ", as the e2e tests read a pod's log.
func NewLog(name string) *log.Logger {
	return log.New(os.Stderr, name+": ", log.LstdFlags)
}

// Main runs run with a context that ends on SIGTERM (a pod's stop) or
// SIGINT, and exits with l.Fatal's status when run fails.
func Main(l *log.Logger, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx)
	stop()
	if err != nil {
		l.Fatal(err)
	}
}
