// Package agent is skiff's node agent: it joins a server with a token and
// does the kubelet's duties on containerd. Only its configuration exists so
// far; Run says so plainly instead of pretending to join.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net/url"
)

// Config is everything `skiff agent` is told.
type Config struct {
	// ServerURL is the server to join, https://host:6443.
	ServerURL string
	// Token is the join token (K10<ca-hash>::server:<secret>).
	Token string
	// DataDir holds the agent's state under <DataDir>/agent.
	DataDir string
	// NodeName is the node's name (default: the hostname).
	NodeName string
}

// ErrNotBuilt is returned by Run: the agent's join and pod duties are not in
// this build yet.
var ErrNotBuilt = errors.New("the node agent (join, pods on containerd, pod network) is not built yet")

// Validate checks the configuration a join needs.
func (c Config) Validate() error {
	if c.ServerURL == "" {
		return errors.New("--server (or SKIFF_URL) is required")
	}
	u, err := url.Parse(c.ServerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--server %q: want https://host:port", c.ServerURL)
	}
	if c.Token == "" {
		return errors.New("--token (or SKIFF_TOKEN) is required")
	}
	return nil
}

// Run validates the configuration and then reports ErrNotBuilt.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return ErrNotBuilt
}
