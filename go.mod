module skiff

go 1.26.0

require (
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.1.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
)
