package timer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a length of time as people say it and recognisers
// write it: "twenty five minutes", "an hour and a half", "two and a half
// minutes", "1 minute 30 seconds", "90 seconds", "half an hour", "a quarter
// of an hour", "1.5 hours", "5m". Go's own "1h30m" is accepted too.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 0, errors.New("no duration given")
	}
	if d, err := time.ParseDuration(strings.ReplaceAll(s, " ", "")); err == nil && d > 0 {
		return d, nil
	}
	words := splitWords(s)
	var total float64         // seconds
	var num, lastUnit float64 // lastUnit: the previous number's ("an hour and a half")
	haveNum, haveAny := false, false
	flush := func(unit float64) {
		if !haveNum {
			num = 1 // "an hour" has its number in "an"; a bare "minute" means one
		}
		total += num * unit
		num, haveNum, haveAny = 0, false, true
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if unit, ok := units[w]; ok {
			flush(unit)
			lastUnit = unit
			continue
		}
		switch w {
		case "and", "of", "for", "in", "about", "just", "exactly", "only", "timer", "a", "an", "another":
			if (w == "a" || w == "an") && !haveNum {
				// "a minute", "an hour": one, unless "a half"/"a quarter" follows
				if i+1 < len(words) && (words[i+1] == "half" || words[i+1] == "quarter") {
					continue
				}
				num, haveNum = 1, true
			}
			continue
		case "half":
			if haveNum && num == 1 && i > 0 && (words[i-1] == "a" || words[i-1] == "an") {
				num = 0.5 // "a half hour"
			} else if !haveNum && haveAny {
				total += 0.5 * lastUnit // "an hour and a half"
				continue
			} else if haveNum {
				num += 0.5 // "two and a half minutes"
			} else {
				num, haveNum = 0.5, true // "half an hour"
			}
			continue
		case "quarter", "quarters":
			v := 0.25
			if haveNum && num > 1 && w == "quarters" {
				v = num * 0.25 // "three quarters of an hour"
				num = 0
			}
			if !haveNum && haveAny {
				total += v * lastUnit
				continue
			}
			if haveNum && num == 1 && i > 0 && (words[i-1] == "a" || words[i-1] == "an") {
				num = 0
			}
			num += v
			haveNum = true
			continue
		}
		v, n, ok := readNumber(words[i:])
		if !ok {
			return 0, fmt.Errorf("cannot read %q as a duration (try \"ten minutes\" or \"90 seconds\")", s)
		}
		if haveNum && num >= 1 && v < 1 {
			num += v
		} else {
			num = v
		}
		haveNum = true
		i += n - 1
	}
	if haveNum {
		return 0, fmt.Errorf("%q has a number but no unit: say seconds, minutes or hours", s)
	}
	if !haveAny {
		return 0, fmt.Errorf("cannot read %q as a duration", s)
	}
	return time.Duration(total * float64(time.Second)).Round(time.Second), nil
}

var units = map[string]float64{
	"second": 1, "seconds": 1, "sec": 1, "secs": 1, "s": 1,
	"minute": 60, "minutes": 60, "min": 60, "mins": 60, "m": 60,
	"hour": 3600, "hours": 3600, "hr": 3600, "hrs": 3600, "h": 3600,
}

var small = map[string]float64{
	"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
	"fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
	"nineteen": 19, "couple": 2, "few": 3,
}

var tens = map[string]float64{
	"twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50,
	"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}

// readNumber reads one number at the start of words: digits ("25",
// "1.5") or words up to the thousands ("two hundred and forty five"). n
// is how many words it used.
func readNumber(words []string) (v float64, n int, ok bool) {
	if f, err := strconv.ParseFloat(words[0], 64); err == nil && f >= 0 {
		return f, 1, true
	}
	var cur, total float64
	for n < len(words) {
		w := words[n]
		switch {
		case small[w] != 0 || w == "zero":
			cur += small[w]
		case tens[w] != 0:
			cur += tens[w]
		case w == "hundred":
			if cur == 0 {
				cur = 1
			}
			cur *= 100
		case w == "thousand":
			if cur == 0 {
				cur = 1
			}
			total += cur * 1000
			cur = 0
		case w == "and" && n > 0 && n+1 < len(words) && isNumberWord(words[n+1]) && words[n+1] != "half":
			// "two hundred and five"
		default:
			if n == 0 {
				return 0, 0, false
			}
			return total + cur, n, true
		}
		n++
	}
	return total + cur, n, n > 0
}

func isNumberWord(w string) bool {
	_, a := small[w]
	_, b := tens[w]
	return a || b || w == "hundred" || w == "thousand"
}

// splitWords lower-cases s and splits it into words and numbers: "5m" is
// "5" "m", "twenty-five" is "twenty" "five", "1:30" is "1" "minute" "30"
// "seconds".
func splitWords(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '-' || r == ',' || r == '!' || r == '?' || r == ';'
	}) {
		f = strings.Trim(f, ".")
		if m, sec, ok := strings.Cut(f, ":"); ok {
			out = append(out, m, "minutes", sec, "seconds")
			continue
		}
		// split a number glued to its unit: "5m", "90s", "2hours"
		i := 0
		for i < len(f) && (f[i] >= '0' && f[i] <= '9' || f[i] == '.') {
			i++
		}
		if i > 0 && i < len(f) {
			out = append(out, f[:i], f[i:])
			continue
		}
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
