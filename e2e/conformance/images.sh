#!/bin/bash
# Builds the images the [Conformance] tests use, as docker-archive tarballs under $CONF_DIR/images,
# with the exact names the v1.37.2 e2e.test asks for (test/utils/image/manifest.go).
# Needs: $CONF_DIR/bin/agnhost (build.sh), Debian's busybox-static, curl, bind9-dnsutils,
# netcat-openbsd, socat, iproute2, iperf (this script apt-installs what is missing).
#
#   real builds:   nonewprivs:1.4 (nnp, static, setuid root), agnhost:2.66.1 and :2.55 (agnhost from source, static; plus busybox applets and
#                  Debian's curl/dig/nc/bash/ss/ip/socat/iperf/getent with their shared libraries instead
#                  of upstream's Alpine packages; /bin/sh is dash), busybox:1.37.0-2 and :1.36.1-1
#                  (Debian busybox 1.35, all applets, /bin/sh = shsel: bash for env names ash drops, else ash),
#                  glibc-dns-testing:2.1.1 (Debian dig/getent),
#                  pause:3.10.2 (a tiny static Go pause), nonroot:1.5 (busybox, USER 1234)
#   SUBSTITUTES:   nginx:1.27.0-2, nginx:1.28.0-2 (busybox httpd on :80 serving
#                  /usr/share/nginx/html), kitten:1.8, nautilus:1.8 (busybox httpd on :80 serving
#                  upstream's html/ of those images: data.json and the picture)
#                  sample-apiserver:1.29.2 (k8s.io/sample-apiserver v0.37.2, static) and etcd:3.7.0-0
#                  (go.etcd.io/etcd/server/v3 v3.7.0, static, /usr/local/bin/etcd) for the Aggregator test
#   NOT BUILT:     resource-consumer, volume/nfs, volume/iscsi, perl, ...
#
#   images.sh aggregator   builds only sample-apiserver.tar and etcd.tar (conformance.sh runs it
#                          when an older image set lacks them)
#   images.sh busybox      builds only busybox.tar
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CONF_DIR=${CONF_DIR:-${TMPDIR:-/tmp}/conformance}
export PATH=/usr/local/go/bin:$PATH
OUT=$CONF_DIR/images
W=$CONF_DIR/images/work
mkdir -p "$OUT" "$W"
E2E=registry.k8s.io/e2e-test-images

need=""
command -v curl >/dev/null || need="$need curl"
command -v dig >/dev/null || need="$need bind9-dnsutils"
command -v nc.openbsd >/dev/null || need="$need netcat-openbsd"
command -v socat >/dev/null || need="$need socat"
command -v iperf >/dev/null || need="$need iperf"
command -v ss >/dev/null || need="$need iproute2"
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || need="$need busybox-static"
if [ -n "$need" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need; fi

# base_fs DIR: busybox with every applet in /bin, passwd/group, the usual directories
base_fs() {
  local d=$1
  rm -rf "$d"; mkdir -p "$d"/{bin,etc,tmp,proc,sys,dev,var/run,root,usr/bin,usr/sbin,sbin,home}
  chmod 1777 "$d/tmp"
  cp /bin/busybox "$d/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$d/bin/$a" ] || ln -s busybox "$d/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > "$d/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$d/etc/group"
  printf 'hosts: files dns\n' > "$d/etc/nsswitch.conf"
}

# copy_dyn DIR BIN...: copies Debian binaries with every shared library ldd names
copy_dyn() {
  local d=$1; shift
  local b real lib
  for b in "$@"; do
    command -v "$b" >/dev/null || { echo "skip $b (not installed)"; continue; }
    real=$(readlink -f "$(command -v "$b")")
    mkdir -p "$d/usr/bin"
    cp "$real" "$d/usr/bin/$b"
    for lib in $(ldd "$real" | grep -o '/[^ ]*'); do
      mkdir -p "$d$(dirname "$lib")"
      [ -e "$d$lib" ] || cp -L "$lib" "$d$lib"
    done
  done
}

# --- Aggregator test (test/e2e/apimachinery/aggregator.go): the sample-apiserver image and the etcd
# sidecar it stores in (the test runs `/usr/local/bin/etcd --listen-client-urls ...` as the command).
# Upstream builds its 1.29.2 image from an older sample-apiserver; v0.37.2 matches the v1.37.2 tests
# and the API groups this cluster serves (flowcontrol v1, admissionregistration v1).
SAMPLE_APISERVER_VERSION=${SAMPLE_APISERVER_VERSION:-v0.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
aggregator_images() {
  local bin=$CONF_DIR/bin
  mkdir -p "$bin"
  if [ ! -x "$bin/sample-apiserver" ]; then
    echo "== sample-apiserver $SAMPLE_APISERVER_VERSION (static)"
    # its go.mod has no replace directives, so a plain go install of the module works
    (cd / && GOBIN="$bin" CGO_ENABLED=0 GOFLAGS= go install -trimpath -ldflags "-s -w" "k8s.io/sample-apiserver@$SAMPLE_APISERVER_VERSION")
  fi
  if [ ! -x "$bin/etcd" ]; then
    echo "== etcd $ETCD_VERSION (static)"
    # etcd's server module replaces its sibling modules with ../ paths, which `go install pkg@v`
    # refuses: build it from a scratch module that requires it instead
    local eb=$CONF_DIR/build-etcd
    mkdir -p "$eb"
    [ -f "$eb/go.mod" ] || (cd "$eb" && GOFLAGS= go mod init etcdbuild >/dev/null 2>&1)
    (cd "$eb" && GOFLAGS= go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && \
      CGO_ENABLED=0 GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3 && \
      mv "$bin/etcd.tmp" "$bin/etcd")
  fi
  base_fs "$W/sample-apiserver"
  cp "$bin/sample-apiserver" "$W/sample-apiserver/sample-apiserver"
  python3 "$HERE/mkimage.py" "$OUT/sample-apiserver.tar" "$W/sample-apiserver" --tag "$E2E/sample-apiserver:1.29.2" \
    --entrypoint '["/sample-apiserver"]'
  base_fs "$W/etcd"
  mkdir -p "$W/etcd/usr/local/bin"
  cp "$bin/etcd" "$W/etcd/usr/local/bin/etcd"
  python3 "$HERE/mkimage.py" "$OUT/etcd.tar" "$W/etcd" --tag "registry.k8s.io/etcd:3.7.0-0" \
    --cmd '["/usr/local/bin/etcd"]' --port 2379 --port 2380
}
if [ "${1:-}" = aggregator ]; then
  aggregator_images
  rm -rf "$W"
  ls -la "$OUT/sample-apiserver.tar" "$OUT/etcd.tar"
  exit 0
fi

# --- busybox. Debian's busybox 1.35 `sh` drops environment variables whose names are not shell
# identifiers (data-1=...), which upstream's busybox 1.37 keeps and the env-from [Conformance]
# tests need; bash keeps them, but other tests expect ash's messages ("/bin/sh: can't create ...").
# BUSYBOX_SH=select (default): /bin/sh is shsel (static Go, cached in $CONF_DIR/bin), which execs
# bash when the environment holds such a name and busybox ash otherwise; =bash: /bin/sh is bash;
# =busybox: plain ash.
base_fs "$W/busybox"
case "${BUSYBOX_SH:-select}" in
select)
  if [ ! -x "$CONF_DIR/bin/shsel" ] || [ "$HERE/shsel/main.go" -nt "$CONF_DIR/bin/shsel" ]; then
    mkdir -p "$CONF_DIR/bin"
    (cd "$HERE/shsel" && CGO_ENABLED=0 GOOS=linux GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$CONF_DIR/bin/shsel.tmp" . && \
      mv "$CONF_DIR/bin/shsel.tmp" "$CONF_DIR/bin/shsel")
  fi
  copy_dyn "$W/busybox" bash
  rm -f "$W/busybox/bin/sh" && cp "$CONF_DIR/bin/shsel" "$W/busybox/bin/sh" && chmod 0755 "$W/busybox/bin/sh"
  ;;
bash)
  copy_dyn "$W/busybox" bash
  rm -f "$W/busybox/bin/sh" && ln -s /usr/bin/bash "$W/busybox/bin/sh"
  ;;
esac
python3 "$HERE/mkimage.py" "$OUT/busybox.tar" "$W/busybox" --tag "$E2E/busybox:1.37.0-2" --tag "$E2E/busybox:1.36.1-1" --cmd '["sh"]'
if [ "${1:-}" = busybox ]; then
  rm -rf "$W"
  ls -la "$OUT/busybox.tar"
  exit 0
fi

# --- nonroot (upstream: busybox with USER 1234)
base_fs "$W/nonroot"
python3 "$HERE/mkimage.py" "$OUT/nonroot.tar" "$W/nonroot" --tag "$E2E/nonroot:1.5" --user 1234 --cmd '["sh"]'

# --- nonewprivs: upstream's nnp (prints its effective uid) as a static Go binary, setuid root, so
# that a container with allowPrivilegeEscalation=false shows that the setuid bit did not take effect
mkdir -p "$W/nnp-src"
cat > "$W/nnp-src/main.go" <<'EOF'
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("Effective uid: %d\n", os.Geteuid())
}
EOF
[ -f "$W/nnp-src/go.mod" ] || (cd "$W/nnp-src" && GOFLAGS= go mod init nnp >/dev/null 2>&1)
base_fs "$W/nonewprivs"
mkdir -p "$W/nonewprivs/usr/local/bin"
(cd "$W/nnp-src" && CGO_ENABLED=0 GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$W/nonewprivs/usr/local/bin/nnp" .)
chown 0:0 "$W/nonewprivs/usr/local/bin/nnp" && chmod 4755 "$W/nonewprivs/usr/local/bin/nnp"
python3 "$HERE/mkimage.py" "$OUT/nonewprivs.tar" "$W/nonewprivs" --tag "$E2E/nonewprivs:1.4" --cmd '["nnp"]'

# --- pause: tiny static Go program, exits 0 on SIGTERM/SIGINT
mkdir -p "$W/pause-src"
cat > "$W/pause-src/main.go" <<'EOF'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
	os.Exit(0)
}
EOF
[ -f "$W/pause-src/go.mod" ] || (cd "$W/pause-src" && GOFLAGS= go mod init pause >/dev/null 2>&1)
rm -rf "$W/pause"; mkdir -p "$W/pause"
(cd "$W/pause-src" && CGO_ENABLED=0 GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$W/pause/pause" .)
python3 "$HERE/mkimage.py" "$OUT/pause.tar" "$W/pause" --tag "registry.k8s.io/pause:3.10.2" --entrypoint '["/pause"]'

# --- agnhost (both tags the tests use)
base_fs "$W/agnhost"
copy_dyn "$W/agnhost" curl dig nslookup host nc bash ss ip socat iperf dash getent
# Debian's static busybox prefers its own applets over PATH in `sh -c` (nc, wget, ...): make
# /bin/sh dash, so that `sh -c "nc ..."` finds /usr/bin/nc (OpenBSD netcat, as upstream's Alpine)
rm -f "$W/agnhost/bin/sh" && ln -s /usr/bin/dash "$W/agnhost/bin/sh"
mkdir -p "$W/agnhost/usr/local/bin" && ln -s /usr/bin/iperf "$W/agnhost/usr/local/bin/iperf"
cp "$CONF_DIR/bin/agnhost" "$W/agnhost/agnhost"
ln -s agnhost "$W/agnhost/agnhost-2"
mkdir -p "$W/agnhost/uploads"
KDIR=$(cat "$CONF_DIR/bin/kubernetes-src" 2>/dev/null || (cd "$CONF_DIR/build" && go mod download -json "k8s.io/kubernetes@${K8S_VERSION:-v1.37.2}" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'))
cp "$KDIR/test/images/agnhost/porter/localhost.crt" "$KDIR/test/images/agnhost/porter/localhost.key" "$W/agnhost/"
chmod 644 "$W/agnhost/localhost.crt" "$W/agnhost/localhost.key"
printf 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n' >> "$W/agnhost/etc/passwd"
printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >> "$W/agnhost/etc/group"
mkdir -p "$W/agnhost/home/user-defined-in-image"
python3 "$HERE/mkimage.py" "$OUT/agnhost.tar" "$W/agnhost" --tag "$E2E/agnhost:2.66.1" --tag "$E2E/agnhost:2.55" \
  --entrypoint '["/agnhost"]' --cmd '["pause"]' --port 80 --port 8080 --port 8081 --port 9376 --port 5000

# --- glibc-dns-testing (upstream: debian bookworm-slim + dnsutils + coredns): Debian's dig and
# getent with glibc, dash as sh, busybox applets for the rest; no coredns binary
base_fs "$W/glibc-dns"
copy_dyn "$W/glibc-dns" dig nslookup host getent dash
rm -f "$W/glibc-dns/bin/sh" && ln -s /usr/bin/dash "$W/glibc-dns/bin/sh"
python3 "$HERE/mkimage.py" "$OUT/glibc-dns-testing.tar" "$W/glibc-dns" --tag "$E2E/glibc-dns-testing:2.1.1" --cmd '["sh"]'

# --- SUBSTITUTES for nginx / kitten / nautilus: busybox httpd in the foreground on :80
for v in nginx:1.27.0-2 nginx:1.28.0-2; do
  n=${v//[:.]/-}
  base_fs "$W/$n"
  mkdir -p "$W/$n/usr/share/nginx/html" "$W/$n/etc/nginx"
  echo "<html><body>Welcome to nginx! (busybox httpd substitute)</body></html>" > "$W/$n/usr/share/nginx/html/index.html"
  python3 "$HERE/mkimage.py" "$OUT/$n.tar" "$W/$n" --tag "$E2E/$v" --port 80 \
    --entrypoint '["/bin/httpd","-f","-p","80","-h","/usr/share/nginx/html"]'
done
for v in kitten:1.8 nautilus:1.8; do
  n=${v//[:.]/-}
  base_fs "$W/$n"
  mkdir -p "$W/$n/var/www"
  echo "${v%%:*}" > "$W/$n/var/www/index.html"
  # what upstream's image serves (the Update Demo tests read data.json through pods/proxy)
  cp "$KDIR/test/images/${v%%:*}/html/"* "$W/$n/var/www/"
  chmod 0644 "$W/$n/var/www/"*
  # upstream's image is agnhost's (Alpine) with data.json and the picture at
  # / (its Dockerfile's COPY): the ImageVolume test reads both from the
  # image's root, and the os-release of upstream's Alpine base
  cp "$KDIR/test/images/${v%%:*}/html/"* "$W/$n/"
  chmod 0644 "$W/$n/"*.json "$W/$n/"*.jpg 2>/dev/null || true
  printf 'NAME="Alpine Linux"\nID=alpine\nPRETTY_NAME="Alpine Linux (skiff conformance substitute: busybox httpd with upstream %s files)"\n' "${v%%:*}" > "$W/$n/etc/os-release"
  python3 "$HERE/mkimage.py" "$OUT/$n.tar" "$W/$n" --tag "$E2E/$v" --port 80 \
    --entrypoint '["/bin/httpd","-f","-p","80","-h","/var/www"]'
done
aggregator_images
rm -rf "$W"
ls -la "$OUT"
