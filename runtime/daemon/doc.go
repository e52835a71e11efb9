// Package daemon runs containerd for the agent: by default a containerd v2
// daemon embedded in the skiff binary (dispatched on the executable's name,
// as k3s does), with its own config, root and sockets under the data dir,
// supervised and restarted while the agent runs.
package daemon
