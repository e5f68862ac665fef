package chserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/driftline/driftline/internal/freeport"
)

// Defaults of ClusterOptions.
const (
	DefaultClusterName = "driftline"
	// DefaultClusterCache is each member's mark and uncompressed cache:
	// four members and ZooKeeper share a developer's machine.
	DefaultClusterCache = 64 << 20
	// DefaultClusterMemory caps each member on releases that know
	// max_server_memory_usage.
	DefaultClusterMemory = 1 << 30
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Dir holds ZooKeeper's directory (zookeeper/) and each server's
	// (sSrR/). Data from a previous run is kept. Required.
	Dir string
	// Name is the cluster's name. Default: DefaultClusterName.
	Name string
	// Shards and Replicas size the cluster. Default: 2 and 2.
	Shards, Replicas int
	// BasePort fixes the ports: ZooKeeper BasePort, and for the n-th
	// server (0-based, shard-major) native BasePort+1+n, HTTP
	// BasePort+101+n and interserver BasePort+201+n. Default: 0, free
	// ports picked at start.
	BasePort int
	// Binary, Log, LogLevel, DieWithParent: as in Options, for every
	// server. CacheSize and MaxMemory default to DefaultClusterCache and
	// DefaultClusterMemory.
	Binary        Binary
	Log           io.Writer
	LogLevel      string
	DieWithParent bool
	CacheSize     int64
	MaxMemory     int64
}

// LocalCluster is ZooKeeper and Shards x Replicas ClickHouse servers on
// loopback ports: what a cluster deployment looks like, on one machine.
type LocalCluster struct {
	name      string
	zk        *ZooKeeper
	opts      []Options // per server, shard-major
	shardSize int

	// mu protects servers, which Kill and Restart replace.
	mu      sync.Mutex
	servers []*Server
}

// StartCluster starts ZooKeeper and then every server, each configured
// with the whole cluster (internal_replication on) and its macros
// {shard} (01, 02, ...) and {replica} (r1, r2, ...), and returns once all
// answer. On error it stops what it started.
func StartCluster(ctx context.Context, o ClusterOptions) (_ *LocalCluster, err error) {
	if o.Dir == "" {
		return nil, errors.New("cluster: Dir is required")
	}
	if o.Name == "" {
		o.Name = DefaultClusterName
	}
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.Replicas <= 0 {
		o.Replicas = 2
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultClusterCache
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultClusterMemory
	}
	n := o.Shards * o.Replicas
	port := func(offset int) (int, error) {
		if o.BasePort > 0 {
			return o.BasePort + offset, nil
		}
		return freeport.Pick("127.0.0.1")
	}
	zkPort, err := port(0)
	if err != nil {
		return nil, err
	}
	c := &LocalCluster{name: o.Name, shardSize: o.Replicas}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	c.zk, err = StartZooKeeper(ctx, ZooKeeperOptions{
		Dir: filepath.Join(o.Dir, "zookeeper"), Port: zkPort, DieWithParent: o.DieWithParent,
	})
	if err != nil {
		return nil, err
	}
	type ports struct{ tcp, http, inter int }
	ps := make([]ports, n)
	seen := map[int]bool{zkPort: true}
	for i := range ps {
		for _, p := range []struct {
			dst    *int
			offset int
		}{{&ps[i].tcp, 1 + i}, {&ps[i].http, 101 + i}, {&ps[i].inter, 201 + i}} {
			for {
				v, err := port(p.offset)
				if err != nil {
					return nil, err
				}
				if !seen[v] || o.BasePort > 0 {
					*p.dst, seen[v] = v, true
					break
				}
			}
		}
	}
	shards := make([][]string, o.Shards)
	for i := range ps {
		shards[i/o.Replicas] = append(shards[i/o.Replicas], "127.0.0.1:"+strconv.Itoa(ps[i].tcp))
	}
	for i := range ps {
		c.opts = append(c.opts, Options{
			Dir:             filepath.Join(o.Dir, fmt.Sprintf("s%dr%d", i/o.Replicas+1, i%o.Replicas+1)),
			TCPPort:         ps[i].tcp,
			HTTPPort:        ps[i].http,
			InterserverPort: ps[i].inter,
			Binary:          o.Binary,
			Log:             o.Log,
			LogLevel:        o.LogLevel,
			CacheSize:       o.CacheSize,
			MaxMemory:       o.MaxMemory,
			DieWithParent:   o.DieWithParent,
			Cluster: &Cluster{
				Name:      o.Name,
				Shards:    shards,
				ZooKeeper: []string{c.zk.Addr()},
				Shard:     fmt.Sprintf("%02d", i/o.Replicas+1),
				Replica:   fmt.Sprintf("r%d", i%o.Replicas+1),
			},
		})
	}
	c.servers = make([]*Server, n)
	for i := range c.opts {
		if c.servers[i], err = Start(ctx, c.opts[i]); err != nil {
			return nil, fmt.Errorf("cluster server %d: %w", i, err)
		}
	}
	return c, nil
}

// Name returns the cluster's name, for -clickhouse.cluster.
func (c *LocalCluster) Name() string { return c.name }

// ZooKeeper returns the cluster's ZooKeeper.
func (c *LocalCluster) ZooKeeper() *ZooKeeper { return c.zk }

// Addrs returns every server's native address, shard-major.
func (c *LocalCluster) Addrs() []string {
	out := make([]string, len(c.opts))
	for i, o := range c.opts {
		out[i] = "127.0.0.1:" + strconv.Itoa(o.TCPPort)
	}
	return out
}

// Server returns the i-th server (shard-major: shard i/Replicas, replica
// i%Replicas).
func (c *LocalCluster) Server(i int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// Kill ends the i-th server with SIGKILL, as a crash would.
func (c *LocalCluster) Kill(i int) {
	if s := c.Server(i); s != nil {
		s.Kill()
	}
}

// Restart starts the i-th server again on its directory and ports, after
// Kill or a crash.
func (c *LocalCluster) Restart(ctx context.Context, i int) error {
	s, err := Start(ctx, c.opts[i])
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.servers[i] = s
	c.mu.Unlock()
	return nil
}

// Stop stops every server, then ZooKeeper.
func (c *LocalCluster) Stop() error {
	c.mu.Lock()
	servers := append([]*Server(nil), c.servers...)
	c.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, s := range servers {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Stop(); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.zk != nil {
		errs = append(errs, c.zk.Stop())
	}
	return errors.Join(errs...)
}

// StopClusterDir stops the servers and the ZooKeeper that a StartCluster
// on dir left running (a detached `make cluster-up`), found by their pid
// files. Data stays.
func StopClusterDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if !e.IsDir() || e.Name() == "zookeeper" {
			continue
		}
		if pid, ok := runningServer(sub); ok {
			_ = stopPID(pid, filepath.Join(sub, pidFile))
		}
	}
	return stopZooKeeperDir(filepath.Join(dir, "zookeeper"))
}
