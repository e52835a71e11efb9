package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// defaultConfigFile is read when --config is not given, as k3s reads
// /etc/rancher/k3s/config.yaml; a missing default file is not an error.
const defaultConfigFile = "/etc/skiff/config.yaml"

// envFlags maps environment variables to the flags they set.
var envFlags = map[string]string{
	"SKIFF_TOKEN": "token",
	"SKIFF_URL":   "server",
}

// resolveFlags fills the flags not given on the command line, first from the
// environment, then from the config file (YAML whose keys are flag names), so
// the precedence is: command line, environment, file, default.
func resolveFlags(flags *pflag.FlagSet, getenv func(string) string) error {
	for env, name := range envFlags {
		f := flags.Lookup(name)
		if f == nil || f.Changed {
			continue
		}
		if v := getenv(env); v != "" {
			if err := flags.Set(name, v); err != nil {
				return fmt.Errorf("%s: %w", env, err)
			}
		}
	}
	path, explicit := defaultConfigFile, false
	if f := flags.Lookup("config"); f != nil && f.Changed {
		path, explicit = f.Value.String(), true
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	return applyConfig(flags, path, data)
}

// applyConfig sets every flag named in the YAML document that was not set
// already. Unknown keys are an error: a misspelt key silently ignored would
// leave the user with a default they did not ask for.
func applyConfig(flags *pflag.FlagSet, path string, data []byte) error {
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		f := flags.Lookup(key)
		if f == nil || key == "config" {
			return fmt.Errorf("config file %s: unknown key %q (keys are the command's flag names)", path, key)
		}
		if f.Changed {
			continue
		}
		var items []any
		switch v := values[key].(type) {
		case []any:
			items = v
		case nil:
			continue
		default:
			items = []any{v}
		}
		for _, item := range items {
			if _, nested := item.(map[string]any); nested {
				return fmt.Errorf("config file %s: key %q: want a value or a list, got a mapping", path, key)
			}
			if err := f.Value.Set(scalarString(item)); err != nil {
				return fmt.Errorf("config file %s: key %q: %w", path, key, err)
			}
		}
		f.Changed = true
	}
	return nil
}

// scalarString prints a YAML scalar as a flag value. sigs.k8s.io/yaml decodes
// numbers as float64; whole numbers must print without an exponent.
func scalarString(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return fmt.Sprintf("%d", int64(f))
	}
	return strings.TrimSpace(fmt.Sprint(v))
}
