package server

import (
	"fmt"
	"log/slog"

	"skiff/server/audit"
)

// openAudit loads the audit policy and opens the log it goes to. A bad
// policy or a log that cannot be written stops the server from starting,
// as kube-apiserver; a policy without a log, or the reverse, audits
// nothing (also as upstream), which is worth a warning. closeAudit syncs
// and closes the log.
func openAudit(cfg AuditConfig, log *slog.Logger) (policy *audit.Policy, sink audit.Sink, closeAudit func(), err error) {
	none := func() {}
	if cfg.PolicyFile == "" {
		if cfg.LogPath != "" {
			log.Warn("--audit-log-path is set without --audit-policy-file: nothing is audited")
		}
		return nil, nil, none, nil
	}
	policy, warnings, err := audit.LoadPolicyFile(cfg.PolicyFile)
	if err != nil {
		return nil, nil, none, fmt.Errorf("--audit-policy-file: %w", err)
	}
	for _, w := range warnings {
		log.Warn("audit policy: field ignored", "file", cfg.PolicyFile, "detail", w)
	}
	if cfg.LogPath == "" {
		log.Warn("--audit-policy-file is set without --audit-log-path: nothing is audited")
		return nil, nil, none, nil
	}
	backend, err := audit.OpenLog(audit.LogConfig{Path: cfg.LogPath, MaxSizeMB: cfg.MaxSizeMB, MaxBackups: cfg.MaxBackups})
	if err != nil {
		return nil, nil, none, fmt.Errorf("--audit-log-path: %w", err)
	}
	log.Info("audit log", "path", cfg.LogPath, "policy", cfg.PolicyFile, "rules", len(policy.Rules))
	return policy, backend, func() {
		if err := backend.Close(); err != nil {
			log.Error("audit log: close", "err", err)
		}
	}, nil
}
