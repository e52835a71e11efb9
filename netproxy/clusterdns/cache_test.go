package clusterdns

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

func answerMsg(ttls ...uint32) *dns.Msg {
	m := new(dns.Msg)
	for _, ttl := range ttls {
		m.Answer = append(m.Answer, aRecord("a.example.", ttl, "192.0.2.1"))
	}
	return m
}

func TestCacheTTL_SmallestRecordOrSOAMinimum_Capped(t *testing.T) {
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300}, Minttl: 20}
	negative := func(rcode int, ns ...dns.RR) *dns.Msg {
		m := new(dns.Msg)
		m.Rcode = rcode
		m.Ns = ns
		return m
	}
	truncated := answerMsg(60)
	truncated.Truncated = true
	tests := []struct {
		name string
		msg  *dns.Msg
		want time.Duration
	}{
		{"smallest answer TTL", answerMsg(60, 10, 40), 10 * time.Second},
		{"capped at the maximum", answerMsg(3600), 30 * time.Second},
		{"zero TTL is not cached", answerMsg(0, 60), 0},
		{"NXDOMAIN: SOA minimum", negative(dns.RcodeNameError, soa), 20 * time.Second},
		{"NODATA: SOA minimum", negative(dns.RcodeSuccess, soa), 20 * time.Second},
		{"NXDOMAIN without SOA is not cached", negative(dns.RcodeNameError), 0},
		{"SERVFAIL is not cached", negative(dns.RcodeServerFailure, soa), 0},
		{"truncated is not cached", truncated, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cacheTTL(tt.msg, 30*time.Second); got != tt.want {
				t.Errorf("cacheTTL = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCache_FullCache_EvictsLeastRecentlyUsed(t *testing.T) {
	c := newAnswerCache(2)
	now := time.Unix(1000, 0)
	k := func(n string) cacheKey { return cacheKey{name: n, qtype: dns.TypeA, qclass: dns.ClassINET} }
	c.put(k("a"), answerMsg(60), time.Minute, now)
	c.put(k("b"), answerMsg(60), time.Minute, now)
	if _, _, ok := c.get(k("a"), now); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.put(k("c"), answerMsg(60), time.Minute, now)
	for name, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, _, ok := c.get(k(name), now); ok != want {
			t.Errorf("%s cached: %v, want %v", name, ok, want)
		}
	}
	if c.len() != 2 {
		t.Errorf("cache holds %d entries, bound is 2", c.len())
	}
}

func TestCache_Entry_ExpiresAndAgesTTLs(t *testing.T) {
	c := newAnswerCache(10)
	now := time.Unix(1000, 0)
	k := cacheKey{name: "a.example.", qtype: dns.TypeA, qclass: dns.ClassINET}
	c.put(k, answerMsg(30), 30*time.Second, now)
	m, age, ok := c.get(k, now.Add(12*time.Second))
	if !ok {
		t.Fatal("entry gone before its TTL")
	}
	if ttl := agedCopy(m, age).Answer[0].Header().Ttl; ttl != 18 {
		t.Errorf("aged TTL %d, want 18", ttl)
	}
	if m.Answer[0].Header().Ttl != 30 {
		t.Error("aging modified the cached message")
	}
	if _, _, ok := c.get(k, now.Add(30*time.Second)); ok {
		t.Error("entry served after its TTL")
	}
	if c.len() != 0 {
		t.Errorf("expired entry still held: %d entries", c.len())
	}
}
