// Command consumer is the test cluster's client of a delivered key, as a real one is: it reads
// its key from the delivery Secret mounted as a file before every request (so a renewal is
// picked up as soon as the kubelet updates the file), or from an environment variable the
// kubelet set from the Secret when the pod started (-key-env: a new key needs a restart), calls
// /v1 continuously, and logs every failure, plus a tally every second. test/cluster reads its log.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	keyFile := flag.String("key-file", "/var/run/switchboard/apiKey", "the mounted delivery Secret's key")
	url := flag.String("url", "", "the URL to call, e.g. http://10.96.0.12/v1/connections")
	interval := flag.Duration("interval", 50*time.Millisecond, "time between requests")
	keyEnv := flag.String("key-env", "", "take the key from this environment variable instead of -key-file")
	flag.Parse()
	client := &http.Client{Timeout: 5 * time.Second}
	var ok, failed int
	lastKey := ""
	tally := time.NewTicker(time.Second)
	for {
		raw, err := os.ReadFile(*keyFile)
		if *keyEnv != "" {
			raw, err = []byte(os.Getenv(*keyEnv)), nil
		}
		key := strings.TrimSpace(string(raw))
		switch {
		case err != nil:
			failed++
			fmt.Printf("FAIL reading the key: %v\n", err)
		default:
			if key != lastKey {
				fmt.Printf("KEY %s…\n", key[:min(len(key), 12)])
				lastKey = key
			}
			status, body := call(client, *url, key)
			if status == http.StatusOK {
				ok++
			} else {
				failed++
				fmt.Printf("FAIL %d %s\n", status, body)
			}
		}
		select {
		case <-tally.C:
			fmt.Printf("TALLY ok=%d failed=%d\n", ok, failed)
		default:
		}
		time.Sleep(*interval)
	}
}

func call(client *http.Client, url, key string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(body)
}
