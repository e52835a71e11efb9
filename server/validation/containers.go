package validation

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podContext is what container validation needs to know about the pod around
// the containers.
type podContext struct {
	volumes     map[string]corev1.VolumeSource
	gracePeriod *int64
	isPod       bool // pods get a few checks that pod templates do not
}

func validateContainers(containers []corev1.Container, pc podContext, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(containers) == 0 {
		errs = append(errs, field.Required(fldPath, ""))
	}
	names := sets.New[string]()
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, pc, idxPath)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		errs = append(errs, validateContainerProbes(c, pc.gracePeriod, idxPath)...)
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(idxPath.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(errs, hostPortConflicts(containers, fldPath)...)
}

// validateInitContainers checks init containers; regular holds the regular
// containers because names must be unique across both lists.
func validateInitContainers(containers, regular []corev1.Container, pc podContext, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range regular {
		names.Insert(regular[i].Name)
	}
	for i := range containers {
		c := &containers[i]
		idxPath := fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, pc, idxPath)...)
		sidecar := false
		if c.RestartPolicy != nil {
			errs = append(errs, enum(*c.RestartPolicy, idxPath.Child("restartPolicy"), corev1.ContainerRestartPolicyAlways)...)
			sidecar = *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		// Init containers run one at a time, so only ports within one can clash.
		errs = append(errs, hostPortConflicts(containers[i:i+1], fldPath)...)
		if sidecar {
			errs = append(errs, validateContainerProbes(c, pc.gracePeriod, idxPath)...)
			continue
		}
		errs = append(errs, forbidInitContainerHooks(c, idxPath)...)
	}
	return errs
}

// forbidInitContainerHooks rejects what only makes sense for a container that
// keeps running: a plain init container is expected to exit.
func forbidInitContainerHooks(c *corev1.Container, idxPath *field.Path) field.ErrorList {
	const msg = "may not be set for init containers without restartPolicy=Always"
	var errs field.ErrorList
	if c.Lifecycle != nil {
		errs = append(errs, field.Forbidden(idxPath.Child("lifecycle"), msg))
	}
	if c.LivenessProbe != nil {
		errs = append(errs, field.Forbidden(idxPath.Child("livenessProbe"), msg))
	}
	if c.ReadinessProbe != nil {
		errs = append(errs, field.Forbidden(idxPath.Child("readinessProbe"), msg))
	}
	if c.StartupProbe != nil {
		errs = append(errs, field.Forbidden(idxPath.Child("startupProbe"), msg))
	}
	return errs
}

// validateEphemeralContainers checks debug containers; others holds every
// regular and init container name, which ephemeral names must not reuse.
func validateEphemeralContainers(ecs []corev1.EphemeralContainer, others sets.Set[string], pc podContext, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := others.Clone()
	for i := range ecs {
		idxPath := fldPath.Index(i)
		c := (*corev1.Container)(&ecs[i].EphemeralContainerCommon)
		errs = append(errs, validateContainerCommon(c, podContext{volumes: pc.volumes, isPod: true}, idxPath)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		// The target must be a regular or init container: its process
		// namespace is the one the debug container joins.
		if t := ecs[i].TargetContainerName; t != "" && !others.Has(t) {
			errs = append(errs, field.NotFound(idxPath.Child("targetContainerName"), t))
		}
		errs = append(errs, forbidEphemeralFields(c, idxPath)...)
		for j, m := range c.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(idxPath.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(idxPath.Child("volumeMounts").Index(j).Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
			}
		}
	}
	return errs
}

// forbidEphemeralFields keeps debug containers out of the pod's service:
// they may not expose ports, reserve resources or take part in health checks.
func forbidEphemeralFields(c *corev1.Container, idxPath *field.Path) field.ErrorList {
	const msg = "cannot be set for an Ephemeral Container"
	set := map[string]bool{
		"ports":          len(c.Ports) > 0,
		"resources":      len(c.Resources.Limits)+len(c.Resources.Requests)+len(c.Resources.Claims) > 0,
		"resizePolicy":   len(c.ResizePolicy) > 0,
		"restartPolicy":  c.RestartPolicy != nil,
		"livenessProbe":  c.LivenessProbe != nil,
		"readinessProbe": c.ReadinessProbe != nil,
		"startupProbe":   c.StartupProbe != nil,
		"lifecycle":      c.Lifecycle != nil,
	}
	var errs field.ErrorList
	for _, name := range []string{"ports", "resources", "resizePolicy", "restartPolicy", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"} {
		if set[name] {
			errs = append(errs, field.Forbidden(idxPath.Child(name), msg))
		}
	}
	return errs
}

func validateContainerCommon(c *corev1.Container, pc podContext, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else {
		errs = append(errs, dns1123Label(c.Name, fldPath.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(fldPath.Child("image"), ""))
	} else if pc.isPod && strings.TrimSpace(c.Image) != c.Image {
		// Templates tolerate it: some tools use " " as a placeholder image.
		errs = append(errs, field.Invalid(fldPath.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, enum(c.TerminationMessagePolicy, fldPath.Child("terminationMessagePolicy"),
		corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError)...)
	errs = append(errs, validateVolumeMounts(c, pc.volumes, fldPath.Child("volumeMounts"))...)
	errs = append(errs, validateVolumeDevices(c, pc.volumes, fldPath.Child("volumeDevices"))...)
	errs = append(errs, validateContainerPorts(c.Ports, fldPath.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fldPath.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fldPath.Child("envFrom"))...)
	errs = append(errs, validateResourceRequirements(&c.Resources, fldPath.Child("resources"))...)
	errs = append(errs, enum(c.ImagePullPolicy, fldPath.Child("imagePullPolicy"),
		corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, fldPath.Child("securityContext"))...)
	for i, p := range c.ResizePolicy {
		idxPath := fldPath.Child("resizePolicy").Index(i)
		errs = append(errs, enum(p.ResourceName, idxPath.Child("resourceName"), corev1.ResourceCPU, corev1.ResourceMemory)...)
		errs = append(errs, enum(p.RestartPolicy, idxPath.Child("restartPolicy"), corev1.NotRequired, corev1.RestartContainer)...)
	}
	return errs
}

func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		if p.Name != "" {
			if msgs := utilvalidation.IsValidPortName(p.Name); len(msgs) != 0 {
				errs = append(errs, messages(idxPath.Child("name"), p.Name, msgs)...)
			} else if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(idxPath.Child("name"), p.Name))
			} else {
				names.Insert(p.Name)
			}
		}
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(idxPath.Child("containerPort"), ""))
		} else {
			errs = append(errs, portNum(p.ContainerPort, idxPath.Child("containerPort"))...)
		}
		if p.HostPort != 0 {
			errs = append(errs, portNum(p.HostPort, idxPath.Child("hostPort"))...)
		}
		errs = append(errs, enum(p.Protocol, idxPath.Child("protocol"), corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP)...)
		if p.HostIP != "" {
			errs = append(errs, legacyIP(p.HostIP, idxPath.Child("hostIP"))...)
		}
	}
	return errs
}

// hostPortConflicts reports host ports claimed twice for the same address and
// protocol, which could never be bound on one node.
func hostPortConflicts(containers []corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for ci := range containers {
		portsPath := fldPath.Index(ci).Child("ports")
		for pi, p := range containers[ci].Ports {
			if p.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", p.HostIP, p.Protocol, p.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(portsPath.Index(pi).Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return errs
}

func validateVolumeMounts(c *corev1.Container, volumes map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mountPoints := sets.New[string]()
	devices := map[string]string{} // name -> path
	for _, d := range c.VolumeDevices {
		devices[d.Name] = d.DevicePath
	}
	for i, m := range c.VolumeMounts {
		idxPath := fldPath.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		}
		if _, ok := volumes[m.Name]; !ok {
			errs = append(errs, field.NotFound(idxPath.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idxPath.Child("mountPath"), ""))
		}
		if mountPoints.Has(m.MountPath) {
			errs = append(errs, field.Invalid(idxPath.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPoints.Insert(m.MountPath)
		if _, ok := devices[m.Name]; ok {
			errs = append(errs, field.Invalid(idxPath.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		for _, p := range devices {
			if p == m.MountPath {
				errs = append(errs, field.Invalid(idxPath.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
			}
		}
		errs = append(errs, validateMountOptions(c, &m, idxPath)...)
	}
	return errs
}

func validateMountOptions(c *corev1.Container, m *corev1.VolumeMount, idxPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.SubPath != "" {
		errs = append(errs, localDescendingPath(m.SubPath, idxPath.Child("subPath"))...)
	}
	if m.SubPathExpr != "" {
		if m.SubPath != "" {
			errs = append(errs, field.Invalid(idxPath.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		errs = append(errs, localDescendingPath(m.SubPathExpr, idxPath.Child("subPathExpr"))...)
	}
	if m.MountPropagation != nil {
		propPath := idxPath.Child("mountPropagation")
		errs = append(errs, enum(*m.MountPropagation, propPath,
			corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone)...)
		privileged := c.SecurityContext != nil && deref(c.SecurityContext.Privileged, false)
		if *m.MountPropagation == corev1.MountPropagationBidirectional && !privileged {
			errs = append(errs, field.Forbidden(propPath, "Bidirectional mount propagation is available only to privileged containers"))
		}
	}
	if rro := m.RecursiveReadOnly; rro != nil {
		rroPath := idxPath.Child("recursiveReadOnly")
		errs = append(errs, enum(*rro, rroPath, corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled)...)
		if *rro != corev1.RecursiveReadOnlyDisabled {
			if !m.ReadOnly {
				errs = append(errs, field.Forbidden(rroPath, "may only be specified when readOnly is true"))
			}
			if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
				errs = append(errs, field.Forbidden(rroPath, "may only be specified when mountPropagation is None or not specified"))
			}
		}
	}
	return errs
}

func validateVolumeDevices(c *corev1.Container, volumes map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths, names := sets.New[string](), sets.New[string]()
	for i, d := range c.VolumeDevices {
		idxPath := fldPath.Index(i)
		src, found := volumes[d.Name]
		if d.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Invalid(idxPath.Child("name"), d.Name, "must be unique"))
		}
		if found && src.PersistentVolumeClaim == nil && src.Ephemeral == nil {
			errs = append(errs, field.Invalid(idxPath.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if !found {
			errs = append(errs, field.NotFound(idxPath.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			errs = append(errs, field.Required(idxPath.Child("devicePath"), ""))
		}
		if paths.Has(d.DevicePath) {
			errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if hasBacksteps(d.DevicePath) {
			errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths.Insert(d.DevicePath)
		}
		if d.Name != "" {
			names.Insert(d.Name)
		}
	}
	return errs
}

func hasBacksteps(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// localDescendingPath accepts only relative paths that stay below their base.
func localDescendingPath(p string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	if hasBacksteps(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must not contain '..'"))
	}
	return errs
}
