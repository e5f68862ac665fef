package service

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/driftline/driftline/pipeline/stream/topics"
)

// Kafka holds the broker settings beyond the seed list that every binary
// shares: the replication of the topics a process creates, and how its
// clients authenticate and encrypt. Every Kafka client of a binary is
// built from ClientOpts, so one set of flags secures them all.
//
//	DRIFTLINE_KAFKA_REPLICATION_FACTOR   replication factor of created topics
//	DRIFTLINE_KAFKA_MIN_INSYNC_REPLICAS  min.insync.replicas of created topics
//	DRIFTLINE_KAFKA_TLS                  true: connect with TLS
//	DRIFTLINE_KAFKA_TLS_CA               PEM CA bundle of the brokers
//	DRIFTLINE_KAFKA_TLS_CERT             PEM client certificate (mTLS)
//	DRIFTLINE_KAFKA_TLS_KEY              its private key
//	DRIFTLINE_KAFKA_TLS_SERVER_NAME      name checked in the brokers' certificates
//	DRIFTLINE_KAFKA_SASL_MECHANISM       SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN
//	DRIFTLINE_KAFKA_SASL_USER            SASL user
//	DRIFTLINE_KAFKA_SASL_PASSWORD        SASL password
//	DRIFTLINE_KAFKA_SASL_PASSWORD_FILE   file holding the SASL password
type Kafka struct {
	// ReplicationFactor is the replication factor of every topic a
	// process creates (the pipeline's, the checkpoints'); -1 takes the
	// broker's default. Production: 3.
	ReplicationFactor int
	// MinInsyncReplicas is min.insync.replicas of every created topic:
	// with acks=all (every producer of the pipeline) a write succeeds
	// only once this many replicas have it. 0 takes the broker's
	// default. Production: 2 with a replication factor of 3.
	MinInsyncReplicas int

	// TLS turns on TLS to the brokers; setting a CA or a client
	// certificate implies it.
	TLS bool
	// TLSCA is a PEM CA bundle that signs the brokers' certificates;
	// empty trusts the system's roots.
	TLSCA string
	// TLSCert and TLSKey are the PEM client certificate and key, for
	// brokers that authenticate clients by certificate.
	TLSCert, TLSKey string
	// TLSServerName is the name checked in the brokers' certificates;
	// empty checks each broker's own host name.
	TLSServerName string

	// SASLMechanism is SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN; empty
	// turns SASL off.
	SASLMechanism string
	// SASLUser and SASLPassword are the SASL credentials; SASLPasswordFile
	// names a file that holds the password instead (a mounted secret),
	// read at start.
	SASLUser, SASLPassword, SASLPasswordFile string

	// once builds opts (or err) from the settings on first use.
	once sync.Once
	opts []kgo.Opt
	err  error
}

// SASL mechanisms of -kafka.sasl.mechanism.
const (
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLPlain       = "PLAIN"
)

// Replication defaults of the local stack, which has one broker.
const (
	DefaultReplicationFactor = 1
	DefaultMinInsyncReplicas = 1
)

// registerFlags registers the -kafka.* replication and security flags.
func (k *Kafka) registerFlags(fs *flag.FlagSet) {
	fs.IntVar(&k.ReplicationFactor, "kafka.replicationFactor", EnvInt("DRIFTLINE_KAFKA_REPLICATION_FACTOR", DefaultReplicationFactor), "replication factor of every topic this process creates (pipeline topics, checkpoints); -1 takes the broker default. 1 suits the one-broker local stack; production runs 3, so a broker can fail without losing a write")
	fs.IntVar(&k.MinInsyncReplicas, "kafka.minInsyncReplicas", EnvInt("DRIFTLINE_KAFKA_MIN_INSYNC_REPLICAS", DefaultMinInsyncReplicas), "min.insync.replicas of every created topic: an acks=all write succeeds once this many replicas hold it; 0 takes the broker default. Production: 2 with replication 3 (one broker may be down, writes still land twice)")
	fs.BoolVar(&k.TLS, "kafka.tls", envBool("DRIFTLINE_KAFKA_TLS"), "connect to the brokers with TLS (implied by -kafka.tls.ca, -kafka.tls.cert)")
	fs.StringVar(&k.TLSCA, "kafka.tls.ca", Env("DRIFTLINE_KAFKA_TLS_CA", ""), "PEM CA bundle that signs the brokers' certificates; empty trusts the system roots")
	fs.StringVar(&k.TLSCert, "kafka.tls.cert", Env("DRIFTLINE_KAFKA_TLS_CERT", ""), "PEM client certificate for brokers that authenticate clients by certificate (with -kafka.tls.key)")
	fs.StringVar(&k.TLSKey, "kafka.tls.key", Env("DRIFTLINE_KAFKA_TLS_KEY", ""), "PEM private key of -kafka.tls.cert")
	fs.StringVar(&k.TLSServerName, "kafka.tls.serverName", Env("DRIFTLINE_KAFKA_TLS_SERVER_NAME", ""), "name checked in the brokers' certificates; empty checks each broker's host name")
	fs.StringVar(&k.SASLMechanism, "kafka.sasl.mechanism", Env("DRIFTLINE_KAFKA_SASL_MECHANISM", ""), "SASL mechanism: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (PLAIN only over TLS); empty turns SASL off")
	fs.StringVar(&k.SASLUser, "kafka.sasl.user", Env("DRIFTLINE_KAFKA_SASL_USER", ""), "SASL user")
	fs.StringVar(&k.SASLPassword, "kafka.sasl.password", Env("DRIFTLINE_KAFKA_SASL_PASSWORD", ""), "SASL password; prefer -kafka.sasl.passwordFile, which keeps it out of the process list")
	fs.StringVar(&k.SASLPasswordFile, "kafka.sasl.passwordFile", Env("DRIFTLINE_KAFKA_SASL_PASSWORD_FILE", ""), "file holding the SASL password (a mounted secret; one trailing newline is ignored)")
}

func envBool(key string) bool {
	b, _ := strconv.ParseBool(Env(key, "false"))
	return b
}

// Validate checks the settings and loads the files they name.
func (k *Kafka) Validate() error {
	if k.ReplicationFactor == 0 || k.ReplicationFactor < -1 || k.ReplicationFactor > 32767 {
		return fmt.Errorf("-kafka.replicationFactor %d: must be at least 1, or -1 for the broker default", k.ReplicationFactor)
	}
	if k.MinInsyncReplicas < 0 {
		return fmt.Errorf("-kafka.minInsyncReplicas %d: must be at least 1, or 0 for the broker default", k.MinInsyncReplicas)
	}
	if k.ReplicationFactor > 0 && k.MinInsyncReplicas > k.ReplicationFactor {
		return fmt.Errorf("-kafka.minInsyncReplicas %d exceeds -kafka.replicationFactor %d: no write could ever succeed; Possible solutions: lower -kafka.minInsyncReplicas (production: replication 3, min in-sync 2)", k.MinInsyncReplicas, k.ReplicationFactor)
	}
	_, err := k.ClientOpts()
	return err
}

// Replication returns the replication of created topics.
func (k *Kafka) Replication() topics.Replication {
	return topics.Replication{Factor: int16(k.ReplicationFactor), MinInsync: k.MinInsyncReplicas}
}

// ClientOpts returns the franz-go options that secure a client: TLS and
// SASL as configured (none by default). Every Kafka client of a binary
// takes them; files are read once.
func (k *Kafka) ClientOpts() ([]kgo.Opt, error) {
	k.once.Do(func() { k.opts, k.err = k.build() })
	return k.opts, k.err
}

func (k *Kafka) build() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if k.TLS || k.TLSCA != "" || k.TLSCert != "" || k.TLSKey != "" || k.TLSServerName != "" {
		cfg, err := ClientTLSConfig(k.TLSCA, k.TLSCert, k.TLSKey, k.TLSServerName)
		if err != nil {
			return nil, fmt.Errorf("-kafka.tls.*: %w", err)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if k.SASLMechanism == "" {
		if k.SASLUser != "" || k.SASLPassword != "" || k.SASLPasswordFile != "" {
			return nil, errors.New("-kafka.sasl.user or password set without -kafka.sasl.mechanism; Possible solutions: set -kafka.sasl.mechanism SCRAM-SHA-512 (or SCRAM-SHA-256)")
		}
		return opts, nil
	}
	pass := k.SASLPassword
	if k.SASLPasswordFile != "" {
		if pass != "" {
			return nil, errors.New("-kafka.sasl.password and -kafka.sasl.passwordFile are both set; keep one")
		}
		b, err := os.ReadFile(k.SASLPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("-kafka.sasl.passwordFile: %w", err)
		}
		pass = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	if k.SASLUser == "" || pass == "" {
		return nil, fmt.Errorf("-kafka.sasl.mechanism %s needs -kafka.sasl.user and a password (-kafka.sasl.password or -kafka.sasl.passwordFile)", k.SASLMechanism)
	}
	switch strings.ToUpper(k.SASLMechanism) {
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUser, Pass: pass}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUser, Pass: pass}.AsSha512Mechanism()))
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: k.SASLUser, Pass: pass}.AsMechanism()))
	default:
		return nil, fmt.Errorf("-kafka.sasl.mechanism %q: must be %s, %s or %s", k.SASLMechanism, SASLScramSHA256, SASLScramSHA512, SASLPlain)
	}
	return opts, nil
}
