package volumes

import (
	"skiff/runtime/mountinfo"

	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

var ctx = context.Background()

func TestEmptyDir(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := newPod(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(m.cfg.Root, "uid-1", "volumes", "kubernetes.io~empty-dir", "scratch")
	if vols["scratch"] != want {
		t.Fatalf("path %q, want %q", vols["scratch"], want)
	}
	info, err := os.Stat(want)
	if err != nil || !info.IsDir() || info.Mode().Perm() != 0o777 {
		t.Fatalf("emptyDir %v %v", info, err)
	}
	os.WriteFile(filepath.Join(want, "keep"), []byte("x"), 0o644)
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(want, "keep")) != "x" {
		t.Fatal("second Setup lost emptyDir content")
	}
}

func TestEmptyDirMemoryIsSizedTmpfsAndTeardownUnmounts(t *testing.T) {
	m, _, _ := newTestManager(t)
	size := resource.MustParse("8Mi")
	pod := newPod(corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: &size}}})
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	// Idempotent: a second Setup must not stack a second tmpfs.
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := vols["mem"]
	mps, err := mountinfo.Under(dir)
	if err != nil || len(mps) != 1 {
		t.Fatalf("mount points %v %v", mps, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		t.Fatalf("fs type %x, want tmpfs", st.Type)
	}
	if got := int64(st.Blocks) * st.Bsize; got != 8<<20 {
		t.Fatalf("tmpfs size %d, want %d", got, 8<<20)
	}
	if err := m.Teardown(ctx, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if mps, _ := mountinfo.Under(m.cfg.Root); len(mps) != 0 {
		t.Fatalf("still mounted: %v", mps)
	}
	if _, err := os.Stat(m.PodDir("uid-1")); !os.IsNotExist(err) {
		t.Fatalf("pod dir not removed: %v", err)
	}
}

func TestHostPathTypes(t *testing.T) {
	base := t.TempDir()
	os.WriteFile(filepath.Join(base, "file"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(base, "dir"), 0o755)
	sock := filepath.Join(base, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tests := []struct {
		name    string
		path    string
		typ     corev1.HostPathType
		wantErr string
		check   func(t *testing.T, p string)
	}{
		{name: "unset type does no check", path: filepath.Join(base, "missing")},
		{name: "DirectoryOrCreate creates", path: filepath.Join(base, "new/dir"), typ: corev1.HostPathDirectoryOrCreate,
			check: func(t *testing.T, p string) {
				if info, err := os.Stat(p); err != nil || !info.IsDir() {
					t.Fatalf("not created: %v", err)
				}
			}},
		{name: "DirectoryOrCreate on a file fails", path: filepath.Join(base, "file"), typ: corev1.HostPathDirectoryOrCreate, wantErr: "is not a directory"},
		{name: "Directory exists", path: filepath.Join(base, "dir"), typ: corev1.HostPathDirectory},
		{name: "Directory missing fails", path: filepath.Join(base, "nodir"), typ: corev1.HostPathDirectory, wantErr: "does not exist"},
		{name: "File exists", path: filepath.Join(base, "file"), typ: corev1.HostPathFile},
		{name: "File on a directory fails", path: filepath.Join(base, "dir"), typ: corev1.HostPathFile, wantErr: "is not a file"},
		{name: "FileOrCreate does not create the parent", path: filepath.Join(base, "nosub/f"), typ: corev1.HostPathFileOrCreate, wantErr: "no such file or directory"},
		{name: "FileOrCreate creates", path: filepath.Join(base, "dir/f"), typ: corev1.HostPathFileOrCreate,
			check: func(t *testing.T, p string) {
				if info, err := os.Stat(p); err != nil || !info.Mode().IsRegular() {
					t.Fatalf("not created: %v", err)
				}
			}},
		{name: "Socket", path: sock, typ: corev1.HostPathSocket},
		{name: "Socket on a file fails", path: filepath.Join(base, "file"), typ: corev1.HostPathSocket, wantErr: "is not a socket file"},
		{name: "CharDevice", path: "/dev/null", typ: corev1.HostPathCharDev},
		{name: "BlockDevice on a char device fails", path: "/dev/null", typ: corev1.HostPathBlockDev, wantErr: "is not a block device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t)
			typ := tt.typ
			pod := newPod(corev1.Volume{Name: "hp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: tt.path, Type: &typ}}})
			vols, err := m.Setup(ctx, pod)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `volume "hp"`) {
					t.Fatalf("err = %v, want %q naming the volume", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if vols["hp"] != tt.path {
				t.Fatalf("path %q", vols["hp"])
			}
			if tt.check != nil {
				tt.check(t, tt.path)
			}
		})
	}
}

func cmVolume(name, cm string, items []corev1.KeyToPath, optional *bool) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Items: items, Optional: optional}}}
}

func TestConfigMapVolume(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns1"},
		Data: map[string]string{"a.conf": "A", "b.conf": "B"}, BinaryData: map[string][]byte{"bin": {0, 1}}}
	tests := []struct {
		name    string
		vol     corev1.Volume
		files   map[string]string
		wantErr string
	}{
		{name: "all keys", vol: cmVolume("v", "cfg", nil, nil),
			files: map[string]string{"a.conf": "A", "b.conf": "B", "bin": "\x00\x01"}},
		{name: "items at paths", vol: cmVolume("v", "cfg", []corev1.KeyToPath{{Key: "a.conf", Path: "dir/x.conf"}}, nil),
			files: map[string]string{"dir/x.conf": "A"}},
		{name: "optional missing configmap gives an empty volume", vol: cmVolume("v", "nope", nil, bp(true)), files: map[string]string{}},
		{name: "missing configmap names volume and configmap", vol: cmVolume("v", "nope", nil, nil),
			wantErr: `MountVolume.SetUp failed for volume "v" : configmap "nope" not found`},
		{name: "missing item key", vol: cmVolume("v", "cfg", []corev1.KeyToPath{{Key: "zz", Path: "zz"}}, nil),
			wantErr: `configmap "cfg" references non-existent key "zz"`},
		{name: "optional skips missing item key", vol: cmVolume("v", "cfg", []corev1.KeyToPath{{Key: "zz", Path: "zz"}, {Key: "a.conf", Path: "a"}}, bp(true)),
			files: map[string]string{"a": "A"}},
		{name: "item path escaping refused", vol: cmVolume("v", "cfg", []corev1.KeyToPath{{Key: "a.conf", Path: "../x"}}, nil),
			wantErr: "must not contain '..'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t, cm)
			vols, err := m.Setup(ctx, newPod(tt.vol))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := vols["v"]
			if !strings.HasSuffix(dir, "/volumes/kubernetes.io~configmap/v") {
				t.Fatalf("dir %s", dir)
			}
			for p, want := range tt.files {
				if got := readFile(t, filepath.Join(dir, p)); got != want {
					t.Fatalf("%s = %q want %q", p, got, want)
				}
				top := strings.SplitN(p, "/", 2)[0]
				if l := readLink(t, filepath.Join(dir, top)); l != "..data/"+top {
					t.Fatalf("%s links to %q", top, l)
				}
			}
			entries, _ := os.ReadDir(dir)
			visible := 0
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), "..") {
					visible++
				}
			}
			tops := map[string]bool{}
			for p := range tt.files {
				tops[strings.SplitN(p, "/", 2)[0]] = true
			}
			if visible != len(tops) {
				t.Fatalf("%d visible entries, want %d", visible, len(tops))
			}
		})
	}
}

func TestConfigMapUpdateIsAtomic(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns1"},
		Data: map[string]string{"key": "v1", "gone": "soon"}}
	m, cs, clk := newTestManager(t, cm)
	pod := newPod(cmVolume("v", "cfg", nil, nil))
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := vols["v"]
	first := readLink(t, filepath.Join(dir, "..data"))
	if !strings.HasPrefix(first, "..2026_01_02_03_04_05.") {
		t.Fatalf("..data -> %q, want a timestamped dir", first)
	}

	// Unchanged content: nothing is rewritten.
	clk.Add(1e9)
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := readLink(t, filepath.Join(dir, "..data")); got != first {
		t.Fatalf("unchanged content rewritten: %s -> %s", first, got)
	}

	// A process holding the old file keeps seeing the old content.
	old, err := os.Open(filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	cm.Data = map[string]string{"key": "v2", "new": "n"}
	if _, err := cs.CoreV1().ConfigMaps("ns1").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Add(60e9)
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	second := readLink(t, filepath.Join(dir, "..data"))
	if second == first || !strings.HasPrefix(second, "..2026_01_02_03_05_06.") {
		t.Fatalf("..data -> %q after update (was %q)", second, first)
	}
	if got := readFile(t, filepath.Join(dir, "key")); got != "v2" {
		t.Fatalf("key = %q after update", got)
	}
	if got := readFile(t, filepath.Join(dir, "new")); got != "n" {
		t.Fatalf("new = %q", got)
	}
	if l := readLink(t, filepath.Join(dir, "key")); l != "..data/key" {
		t.Fatalf("key symlink %q", l)
	}
	if _, err := os.Lstat(filepath.Join(dir, "gone")); !os.IsNotExist(err) {
		t.Fatalf("removed key still visible: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Fatalf("old timestamped dir kept: %v", err)
	}
	buf := make([]byte, 8)
	n, _ := old.Read(buf)
	if string(buf[:n]) != "v1" {
		t.Fatalf("open old file reads %q", buf[:n])
	}
	if _, err := os.Lstat(filepath.Join(dir, "..data_tmp")); !os.IsNotExist(err) {
		t.Fatal("..data_tmp left behind")
	}
}

func TestRefreshFailureKeepsEarlierContent(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns1"}, Data: map[string]string{"k": "v1"}}
	m, cs, _ := newTestManager(t, cm)
	pod := newPod(cmVolume("v", "cfg", nil, nil))
	first, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("ns1").Delete(ctx, "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	vols, err := m.Setup(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), `volume "v" : configmap "cfg" not found`) {
		t.Fatalf("err = %v", err)
	}
	if vols["v"] != first["v"] || readFile(t, filepath.Join(vols["v"], "k")) != "v1" {
		t.Fatalf("earlier content lost: %v", vols)
	}
}

func TestSecretModes(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns1"},
		Data: map[string][]byte{"tls.key": []byte("K"), "tls.crt": []byte("C")}}
	tests := []struct {
		name  string
		src   corev1.SecretVolumeSource
		fsGrp *int64
		want  map[string]os.FileMode
	}{
		{"default mode is 0644", corev1.SecretVolumeSource{SecretName: "s"}, nil,
			map[string]os.FileMode{"tls.key": 0o644, "tls.crt": 0o644}},
		{"defaultMode 0400", corev1.SecretVolumeSource{SecretName: "s", DefaultMode: i32(0o400)}, nil,
			map[string]os.FileMode{"tls.key": 0o400, "tls.crt": 0o400}},
		{"item mode wins over defaultMode", corev1.SecretVolumeSource{SecretName: "s", DefaultMode: i32(0o444),
			Items: []corev1.KeyToPath{{Key: "tls.key", Path: "k", Mode: i32(0o600)}, {Key: "tls.crt", Path: "c"}}}, nil,
			map[string]os.FileMode{"k": 0o600, "c": 0o444}},
		{"fsGroup may read", corev1.SecretVolumeSource{SecretName: "s", DefaultMode: i32(0o400)}, i64(1234),
			map[string]os.FileMode{"tls.key": 0o440}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t, sec)
			src := tt.src
			pod := newPod(corev1.Volume{Name: "sv", VolumeSource: corev1.VolumeSource{Secret: &src}})
			if tt.fsGrp != nil {
				pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: tt.fsGrp}
			}
			vols, err := m.Setup(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(vols["sv"], "kubernetes.io~secret/sv") {
				t.Fatalf("dir %s", vols["sv"])
			}
			var st unix.Statfs_t
			if err := unix.Statfs(vols["sv"], &st); err != nil || st.Type != unix.TMPFS_MAGIC {
				t.Fatalf("secret volume not on tmpfs: %x %v", st.Type, err)
			}
			for p, want := range tt.want {
				info, err := os.Stat(filepath.Join(vols["sv"], p))
				if err != nil {
					t.Fatal(err)
				}
				if info.Mode().Perm() != want {
					t.Fatalf("%s mode %o, want %o", p, info.Mode().Perm(), want)
				}
				if tt.fsGrp != nil {
					if gid := info.Sys().(*syscall.Stat_t).Gid; int64(gid) != *tt.fsGrp {
						t.Fatalf("gid %d", gid)
					}
				}
			}
		})
	}
}

func TestSecretTmpfsIsUnmountedAtTeardown(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns1"}, Data: map[string][]byte{"k": []byte("v")}}
	m, _, _ := newTestManager(t, sec)
	pod := newPod(corev1.Volume{Name: "sv", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}})
	for i := 0; i < 2; i++ {
		if _, err := m.Setup(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	if mps, _ := mountinfo.Under(m.PodDir("uid-1")); len(mps) != 1 {
		t.Fatalf("want exactly one tmpfs after two Setups, got %v", mps)
	}
	if err := m.Teardown(ctx, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if mps, _ := mountinfo.Under(m.cfg.Root); len(mps) != 0 {
		t.Fatalf("still mounted: %v", mps)
	}
}

func TestDownwardAPIVolume(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := newPod(corev1.Volume{Name: "dw", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}, Mode: i32(0o600)},
			{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
		}}}})
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"memory": resource.MustParse("64Mi")}
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	d := vols["dw"]
	for p, want := range map[string]string{"name": "web", "labels": `app="web"`, "mem": "64"} {
		if got := readFile(t, filepath.Join(d, p)); got != want {
			t.Fatalf("%s = %q want %q", p, got, want)
		}
	}
	pod.Labels["tier"] = "fe"
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(d, "labels")); got != "app=\"web\"\ntier=\"fe\"" {
		t.Fatalf("labels not refreshed: %q", got)
	}
	if info, _ := os.Stat(filepath.Join(d, "labels")); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %o", info.Mode().Perm())
	}
}

func TestUnsupportedVolumeNamesIt(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := newPod(
		corev1.Volume{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "x", Path: "/"}}})
	vols, err := m.Setup(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), `volume "nfs"`) || !strings.Contains(err.Error(), "unsupported volume type") {
		t.Fatalf("err = %v", err)
	}
	if vols["ok"] == "" {
		t.Fatal("the good volume was not set up")
	}
}

func TestPersistentVolumeClaims(t *testing.T) {
	hostDir := filepath.Join(t.TempDir(), "pv")
	m, _, _ := newTestManager(t,
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "unbound", Namespace: "ns1", UID: "pvc-uid-1"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "ns1", UID: "pvc-uid-2"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir}}}},
	)
	claim := func(n, c string, ro bool) corev1.Volume {
		return corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c, ReadOnly: ro}}}
	}
	pod := newPod(claim("a", "unbound", false), claim("b", "bound", true))
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(m.cfg.Root), "pvc", "pvc-uid-1"); vols["a"] != want {
		t.Fatalf("unbound claim at %s, want %s", vols["a"], want)
	}
	if vols["b"] != hostDir {
		t.Fatalf("bound claim at %s", vols["b"])
	}
	if info, err := os.Stat(hostDir); err != nil || !info.IsDir() {
		t.Fatal("hostPath PV dir not created")
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "b", MountPath: "/data"}}
	mounts, err := m.Mounts(pod, &pod.Spec.Containers[0], vols)
	if err != nil || len(mounts) != 1 || !mounts[0].ReadOnly {
		t.Fatalf("readOnly claim mounts %+v %v", mounts, err)
	}
	if err := m.Teardown(ctx, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(vols["a"]); err != nil {
		t.Fatal("claim data removed by pod teardown")
	}
	_, err = m.Setup(ctx, newPod(claim("c", "missing", false)))
	if err == nil || !strings.Contains(err.Error(), `volume "c" : persistentvolumeclaim "missing" not found`) {
		t.Fatalf("err = %v", err)
	}
}

func TestTeardownAndPodUIDsOnDisk(t *testing.T) {
	m, _, _ := newTestManager(t)
	if uids, err := m.PodUIDsOnDisk(); err != nil || len(uids) != 0 {
		t.Fatalf("empty root: %v %v", uids, err)
	}
	for _, uid := range []string{"b", "a"} {
		p := newPod(corev1.Volume{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		p.UID = k8stypes.UID("uid-" + uid)
		if _, err := m.Setup(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	uids, err := m.PodUIDsOnDisk()
	if err != nil || strings.Join(uids, ",") != "uid-a,uid-b" {
		t.Fatalf("uids %v %v", uids, err)
	}
	for i := 0; i < 2; i++ {
		if err := m.Teardown(ctx, "uid-a"); err != nil {
			t.Fatalf("teardown %d: %v", i, err)
		}
	}
	if uids, _ := m.PodUIDsOnDisk(); strings.Join(uids, ",") != "uid-b" {
		t.Fatalf("uids %v", uids)
	}
	if err := m.Teardown(ctx, "../x"); err == nil {
		t.Fatal("path-like UID accepted")
	}
}
