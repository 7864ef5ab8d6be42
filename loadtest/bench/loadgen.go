// Command loadgen is the load of `gridagg bench`: closed-loop clients that each send
// their next request as soon as the last one is answered (no think time, as in the
// paper), against 127.0.0.1 only, bounded by a request count and a time.
//
// Why not locust: on this project's 2-core machines the load runs beside the server it
// measures, and locust's Python took 0.5 ms of CPU per request, a third of the machine
// at gridagg's rates; this program takes about a tenth of that, so the benchmark
// measures the server rather than its client.
//
//	loadgen -url http://127.0.0.1:8080 -requests FILE -clients 32 -max 5000 \
//	        -seconds 15 -result out.json [-token TOKEN]
//
// FILE holds one request a line, "PATH<TAB>JSON BODY", each sent as a POST; client i
// of N sends lines i, i+N, i+2N, ... (wrapping around). The clients start over -ramp
// seconds (default 1). The measured window runs from the end of the ramp to -seconds
// after the start, or until -max answers are counted: every answer that completes
// inside the window is counted, whenever its request was sent (one sent during the ramp
// was served inside the window too: leaving it out understates a slow server, whose
// ramp's requests fill much of a short window), and none that completes outside it.
// The clients send no request after the window closes, and wait for the answers still
// on the way. The result, written as JSON: sent and failures (every request sent);
// requests, seconds (the window's length), rps and latency p50/p95/p99/mean in ms of
// the answers counted; ramp_answers (of those, the ones sent during the ramp) and
// late_answers (answers after the window, not counted). A failure is an answer other
// than 200 or no answer; the first few go to stderr.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type request struct {
	path string
	body []byte
}

type result struct {
	Sent        int64   `json:"sent"`
	Requests    int     `json:"requests"`
	Failures    int     `json:"failures"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"rps"`
	P50         float64 `json:"p50_ms"`
	P95         float64 `json:"p95_ms"`
	P99         float64 `json:"p99_ms"`
	Mean        float64 `json:"mean_ms"`
	RampAnswers int64   `json:"ramp_answers"`
	LateAnswers int64   `json:"late_answers"`
}

const (
	shownFailures = 5
	answerTimeout = 120 * time.Second
)

func main() {
	base := flag.String("url", "", "the API's base URL (127.0.0.1 or localhost)")
	file := flag.String("requests", "", "file of requests, one a line: PATH<TAB>JSON BODY")
	clients := flag.Int("clients", 1, "concurrent clients")
	max := flag.Int64("max", 1000, "close the window once this many answers are counted")
	seconds := flag.Float64("seconds", 30, "stop sending after this many seconds")
	ramp := flag.Float64("ramp", 1, "start the clients evenly over this many seconds")
	token := flag.String("token", "", "bearer token for reads, if the API needs one")
	out := flag.String("result", "", "write the result here as JSON (default: stdout)")
	flag.Parse()

	if err := checkLocal(*base); err != nil {
		fail(err)
	}
	reqs, err := readRequests(*file)
	if err != nil {
		fail(err)
	}
	if *clients < 1 || *max < 1 || *seconds <= 0 || *ramp < 0 || *ramp >= *seconds {
		fail(fmt.Errorf("-clients, -max and -seconds must be positive, -ramp at least 0 and below -seconds"))
	}
	res := run(strings.TrimRight(*base, "/"), reqs, *clients, *max, duration(*seconds), duration(*ramp), *token)
	text, _ := json.Marshal(res)
	if *out == "" {
		fmt.Println(string(text))
	} else if err := os.WriteFile(*out, text, 0o644); err != nil {
		fail(err)
	}
}

func duration(seconds float64) time.Duration {
	return time.Duration(seconds * float64(time.Second))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}

func checkLocal(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return fmt.Errorf("-url %q: give http://127.0.0.1:PORT", base)
	}
	if host := u.Hostname(); host != "127.0.0.1" && host != "localhost" {
		return fmt.Errorf("refusing host %q: 127.0.0.1 only", host)
	}
	return nil
}

func readRequests(path string) ([]request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var reqs []request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		p, body, ok := strings.Cut(sc.Text(), "\t")
		if !ok || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%s line %d: want PATH<TAB>JSON BODY", path, line)
		}
		reqs = append(reqs, request{p, []byte(body)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s holds no requests", path)
	}
	return reqs, nil
}

// run starts client c at c/clients of the ramp (the server's workers then share the
// connections: granian's workers accept from one socket, and a burst of connections
// goes to whichever wakes first) and counts the answers that complete in the window.
func run(base string, reqs []request, clients int, max int64, limit, ramp time.Duration, token string) result {
	host := strings.TrimPrefix(base, "http://")
	var counted, sent, failures, rampAnswers, lateAnswers int64
	var closed atomic.Bool // the window closed early: -max answers counted
	failed := make(chan string, shownFailures)
	latencies := make([][]float64, clients)
	lastDone := make([]time.Time, clients)
	start := time.Now()
	steady, deadline := start.Add(ramp), start.Add(limit)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			time.Sleep(ramp * time.Duration(c) / time.Duration(clients))
			conn := &connection{host: host, token: token}
			defer conn.close()
			for i := c; ; i += clients {
				t0 := time.Now()
				if !t0.Before(deadline) || closed.Load() {
					break
				}
				problem := conn.send(reqs[i%len(reqs)])
				done := time.Now()
				atomic.AddInt64(&sent, 1)
				switch {
				case done.Before(steady):
				case closed.Load() || !done.Before(deadline):
					atomic.AddInt64(&lateAnswers, 1)
				default:
					n := atomic.AddInt64(&counted, 1)
					if n > max {
						atomic.AddInt64(&lateAnswers, 1)
						break
					}
					if n == max {
						closed.Store(true)
					}
					latencies[c] = append(latencies[c], float64(done.Sub(t0))/float64(time.Millisecond))
					lastDone[c] = done
					if t0.Before(steady) {
						atomic.AddInt64(&rampAnswers, 1)
					}
				}
				if problem != "" {
					atomic.AddInt64(&failures, 1)
					select {
					case failed <- problem:
					default:
					}
				}
			}
		}(c)
	}
	wg.Wait()
	close(failed)
	for p := range failed {
		fmt.Fprintln(os.Stderr, "loadgen: failure:", p)
	}
	end := deadline // the window's end: the deadline, or the last answer counted when -max closed it
	if closed.Load() {
		end = steady
		for _, t := range lastDone {
			if t.After(end) {
				end = t
			}
		}
	}
	res := summarize(latencies, end.Sub(steady), int(failures))
	res.Sent, res.RampAnswers, res.LateAnswers = sent, rampAnswers, lateAnswers
	return res
}

// connection is one client's keep-alive HTTP/1.1 connection, driven by hand on its own
// goroutine: net/http's Transport hands every request between goroutines, which
// doubled the client's CPU per request.
type connection struct {
	host, token string
	conn        net.Conn
	reader      *bufio.Reader
	buf         bytes.Buffer
}

// send POSTs one request and says what went wrong, or "" for a 200. A connection the
// server closed is opened again for the next request.
func (c *connection) send(r request) string {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.host, 10*time.Second)
		if err != nil {
			return err.Error()
		}
		c.conn, c.reader = conn, bufio.NewReaderSize(conn, 64<<10)
	}
	c.buf.Reset()
	fmt.Fprintf(&c.buf, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n",
		r.path, c.host, len(r.body))
	if c.token != "" {
		fmt.Fprintf(&c.buf, "Authorization: Bearer %s\r\n", c.token)
	}
	c.buf.WriteString("\r\n")
	c.buf.Write(r.body)
	c.conn.SetDeadline(time.Now().Add(answerTimeout))
	if _, err := c.conn.Write(c.buf.Bytes()); err != nil {
		c.close()
		return err.Error()
	}
	resp, err := http.ReadResponse(c.reader, nil)
	if err != nil {
		c.close()
		return err.Error()
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	if err != nil {
		return err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		if len(body) > 200 {
			body = body[:200]
		}
		return fmt.Sprintf("POST %s: HTTP %d: %s", r.path, resp.StatusCode, body)
	}
	return ""
}

func (c *connection) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

func summarize(latencies [][]float64, window time.Duration, failures int) result {
	var all []float64
	for _, l := range latencies {
		all = append(all, l...)
	}
	res := result{Requests: len(all), Failures: failures, Seconds: window.Seconds()}
	if len(all) == 0 {
		return res
	}
	sort.Float64s(all)
	sum := 0.0
	for _, v := range all {
		sum += v
	}
	res.RPS = float64(len(all)) / res.Seconds
	res.P50, res.P95, res.P99 = percentile(all, 50), percentile(all, 95), percentile(all, 99)
	res.Mean = sum / float64(len(all))
	return res
}

// percentile of sorted values, interpolated linearly between the closest ranks (as
// numpy.percentile does by default).
func percentile(sorted []float64, p float64) float64 {
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(pos)
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}
