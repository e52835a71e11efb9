package validation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"skiff/server/defaults"
)

// Typical manifests as users apply them; after defaulting they must pass,
// or ordinary kubectl/helm workflows would break.
const nginxDeployment = `
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: web
      securityContext: {runAsNonRoot: true, runAsUser: 101, fsGroup: 101, seccompProfile: {type: RuntimeDefault}}
      initContainers:
      - name: migrate
        image: registry.example.com/web/migrate:2.1.0
        command: [sh, -c, "./migrate"]
        envFrom: [{secretRef: {name: db}}]
      containers:
      - name: nginx
        image: nginx:1.25.3
        ports: [{name: http, containerPort: 8080}]
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: CPU_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
        - {name: PASSWORD, valueFrom: {secretKeyRef: {name: db, key: password, optional: true}}}
        resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: "1", memory: 256Mi}}
        readinessProbe: {httpGet: {path: /healthz, port: http}, initialDelaySeconds: 3}
        livenessProbe: {tcpSocket: {port: 8080}}
        lifecycle: {preStop: {sleep: {seconds: 5}}}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts:
        - {name: conf, mountPath: /etc/nginx/conf.d, readOnly: true}
        - {name: cache, mountPath: /var/cache/nginx}
        - {name: kube-api-access, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}
      volumes:
      - name: conf
        configMap: {name: web-conf, items: [{key: default.conf, path: default.conf}]}
      - name: cache
        emptyDir: {sizeLimit: 1Gi}
      - name: kube-api-access
        projected:
          sources:
          - serviceAccountToken: {expirationSeconds: 3607, path: token}
          - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}
          - downwardAPI: {items: [{path: namespace, fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}}]}
      tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}
`

const postgresStatefulSet = `
metadata: {name: db, namespace: default}
spec:
  serviceName: db
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 60
      containers:
      - name: postgres
        image: postgres:16
        ports: [{name: pg, containerPort: 5432}]
        volumeMounts: [{name: data, mountPath: /var/lib/postgresql/data, subPath: pgdata}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: local-path
      resources: {requests: {storage: 10Gi}}
`

const nightlyCronJob = `
metadata: {name: nightly-backup, namespace: default}
spec:
  schedule: "0 3 * * *"
  timeZone: Etc/UTC
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      backoffLimit: 2
      ttlSecondsAfterFinished: 3600
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - {name: backup, image: "busybox:1.36", command: [sh, -c, date]}
`

const webIngress = `
metadata: {name: web, namespace: default, annotations: {kubernetes.io/ingress.class: traefik}}
spec:
  ingressClassName: traefik
  tls: [{hosts: [web.example.com, "*.example.com"], secretName: web-tls}]
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
      - {path: /api, pathType: ImplementationSpecific, backend: {service: {name: api, port: {number: 8080}}}}
`

const nodePortService = `
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http, nodePort: 30080}
  - {name: metrics, port: 9090, protocol: TCP}
`

func TestValidateAcceptsCommonManifests(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest string
		obj      runtime.Object
	}{
		{"deployment with init container, probes and projected token", nginxDeployment, &appsv1.Deployment{}},
		{"statefulset mounting its claim template", postgresStatefulSet, &appsv1.StatefulSet{}},
		{"cron job with time zone", nightlyCronJob, &batchv1.CronJob{}},
		{"ingress with TLS and two path types", webIngress, &networkingv1.Ingress{}},
		{"node port service", nodePortService, &corev1.Service{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := yaml.UnmarshalStrict([]byte(tc.manifest), tc.obj); err != nil {
				t.Fatalf("decode manifest: %v", err)
			}
			defaults.Apply(tc.obj)
			expectNoErrors(t, Validate(tc.obj))
		})
	}
}
