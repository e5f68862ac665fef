// Package deploy holds the deployment files of Driftline: the image
// (Dockerfile), the replicated compose stack (compose/), the Kubernetes
// manifests (kubernetes/), the Redpanda dev compose file (redpanda/), the
// Grafana dashboard and the price book. Its test checks what can be
// checked without Docker or a cluster: every file parses, every command
// names a binary of cmd/ that the image builds, every flag passed exists
// on that binary, and every DRIFTLINE_ variable set is one the code
// reads. docs/deploy.md describes the files.
package deploy
