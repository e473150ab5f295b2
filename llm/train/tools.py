#!/usr/bin/env python3
"""Tool-calling dialogues for the demo model: time, timers and a xiaozhi speaker's volume, said as a recogniser writes them.

The model sees its tools in the engine's compact ChatML form (llm/engine/chat, ToolFormatCompact) and calls them in the
Hermes/Qwen2.5 form; render_tools and tool_call below are byte for byte what the Go side renders and parses:

  <|im_start|>system
  You are voxpipe, ...

  Tools: get_time(), set_timer(duration, label?), cancel_timer()<|im_end|>
  <|im_start|>user
  set a timer for twenty five minutes<|im_end|>
  <|im_start|>assistant
  <tool_call>
  {"name": "set_timer", "arguments": {"duration": "twenty five minutes"}}
  </tool_call><|im_end|>
  <|im_start|>user
  <tool_response>
  Timer set for 25 minutes.
  </tool_response><|im_end|>
  <|im_start|>assistant
  Okay, timer set for 25 minutes.<|im_end|>

Requests are composed from sentence frames, fillers, number words (1-100 as the recogniser spells them, some digits),
durations and a few recognition slips. Frames, fillers and some durations are split: a frame of the held-out share is
never used in training, so eval-tools.jsonl measures phrasings the model never saw. Negatives: the same requests when
their tool is not listed (answered in words), questions that only mention the words (what is a timer, the volume of a
sphere, time zones), and a share of the ordinary corpus given tool lists with unchanged answers.

Two steps around `voxpipe knowledge query --json --augment` (as grounding.py), so a request carries the passages the
server would put before it:

  tools.py questions --data build/train-data-grounded --work build/tools
  voxpipe knowledge query --json --augment --file build/tools/questions.txt > build/tools/answers.jsonl
  tools.py apply --data build/train-data-grounded --work build/tools --out build/train-data-tools

Standard library only, seeded.
"""
import argparse
import hashlib
import json
import os
import random
import re

SYSTEM_PROMPT = ("You are voxpipe, a friendly voice assistant. "
                 "Answer in one or two short spoken sentences.")

# ------------------------------------------------------------------ tools and their compact rendering

# name -> (required arguments, optional arguments), as the compact line shows them: required in order, then "name?".
BUILTIN = [("get_time", [], []), ("set_timer", ["duration"], ["label"]), ("cancel_timer", [], [])]
VOLUME = [("self_audio_speaker_set_volume", ["volume"], []), ("adjust_volume", ["step"], [])]
# Other tools a xiaozhi device or an MCP server may list; never the answer to these requests.
DISTRACTORS = [("self_get_device_status", [], []), ("self_screen_set_brightness", ["brightness"], []),
               ("self_screen_set_theme", ["theme"], []), ("self_camera_take_photo", ["question"], []),
               ("get_weather", ["city"], []), ("search_orders", ["order_id"], []),
               ("play_music", ["query"], []), ("send_message", ["to", "text"], []),
               ("lights_set", ["room", "on"], []), ("web_search", ["query"], [])]


def signature(tool):
    name, req, opt = tool
    return "%s(%s)" % (name, ", ".join(req + [o + "?" for o in opt]))


def render_tools(tools):
    """The compact tool line the engine appends to the system message."""
    return "Tools: " + ", ".join(signature(t) for t in tools)


def system_with_tools(system, tools):
    if not tools:
        return system
    line = render_tools(tools)
    return system + "\n\n" + line if system else line


def tool_call(name, args):
    """An assistant message that calls one tool, as the Hermes/Qwen2.5 template renders it."""
    return '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' % (name, json.dumps(args, ensure_ascii=False))


def tool_response(text):
    return "<tool_response>\n%s\n</tool_response>" % text


# ------------------------------------------------------------------ numbers and durations

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def words(n, rng=None):
    """n (0-100) as the recogniser writes it: "twenty five", "one hundred" or "a hundred"."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    return "a hundred" if rng and rng.random() < 0.3 else "one hundred"


def say(n, rng, digits=0.12):
    return str(n) if rng.random() < digits else words(n, rng)


def unit(n, name):
    return name if n == 1 else name + "s"


def duration(rng):
    """A spoken duration and its length in seconds."""
    r = rng.random()
    if r < 0.42:
        n = rng.choice(range(1, 61)) if rng.random() < 0.8 else rng.randint(61, 100)
        u = "minute"
    elif r < 0.64:
        n = rng.choice([5, 10, 15, 20, 30, 40, 45, 50, 60, 90] + list(range(1, 101)))
        u = "second"
    elif r < 0.74:
        n = rng.randint(1, 12)
        u = "hour"
    elif r < 0.84:  # one of a unit, said "a", "an" or "one"
        u = rng.choice(["minute", "second", "hour"])
        a = "an" if u == "hour" else "a"
        s = {"minute": 60, "second": 1, "hour": 3600}[u]
        if rng.random() < 0.5:
            return rng.choice([a, "one"]) + " " + u, s
        half = {"minute": 90, "second": None, "hour": 5400}[u]
        if half:
            return a + " " + u + " and a half", half
        return a + " " + u, s
    elif r < 0.88:
        n = rng.randint(1, 10)
        u = rng.choice(["minute", "hour"])
        s = {"minute": 60, "hour": 3600}[u]
        return words(n) + " and a half " + u + "s", int(n * s + s / 2)
    elif r < 0.91:
        return rng.choice([("half an hour", 1800), ("half a minute", 30), ("a quarter of an hour", 900),
                           ("quarter of an hour", 900)])
    else:
        big = rng.choice(["minute", "hour"])
        a, b = rng.randint(1, 10 if big == "hour" else 30), rng.randint(1, 59)
        small = "second" if big == "minute" else "minute"
        s = {"minute": 60, "hour": 3600}[big]
        joiner = rng.choice([" and ", " and ", " "])
        return "%s %s%s%s %s" % (say(a, rng), unit(a, big), joiner, say(b, rng), unit(b, small)), a * s + b * s // 60
    n_said = say(n, rng)
    return n_said + " " + unit(n, u), n * {"minute": 60, "second": 1, "hour": 3600}[u]


def spoken_length(seconds):
    """The timer tool's result text: "25 minutes", "1 hour 30 minutes", "2 minutes 30 seconds"."""
    h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
    parts = []
    for v, u in ((h, "hour"), (m, "minute"), (s, "second")):
        if v:
            parts.append("%d %s" % (v, unit(v, u)))
    return " ".join(parts)


# ------------------------------------------------------------------ request frames

# {d}: a duration, {l}: a timer label, {n}: a volume number.
TIME_FRAMES = [
    "what time is it", "what's the time", "what is the time", "do you know what time it is", "got the time",
    "tell me the time", "what time is it now", "what's the time right now", "can you tell me the time",
    "time please", "what's the current time", "current time", "have you got the time",
    "could you tell me what time it is", "what does the clock say", "what time have we got", "how late is it",
    "what time do you have", "tell me what time it is", "what is the time now", "do you have the time",
    "check the time", "what's the time now", "give me the time", "say the time", "what time is it right now",
    "what hour is it", "is it late", "whats the time", "what the time", "the time please", "what's the clock say",
    "what day is it", "what's the date today", "what is today's date", "what day of the week is it",
    "which day is it today", "what's today", "what month is it", "tell me the date",
]
TIMER_FRAMES = [
    "set a timer for {d}", "set a {d} timer", "start a timer for {d}", "timer for {d}", "{d} timer",
    "put a timer on for {d}", "start a {d} timer", "make a timer for {d}", "create a timer for {d}",
    "start a countdown for {d}", "count down {d}", "countdown {d}", "remind me in {d}", "set an alarm for {d}",
    "set an alarm for {d} from now", "wake me up in {d}", "i need a timer for {d}", "for {d} set a timer",
    "give me a timer for {d}", "time {d} for me", "start timing {d}", "set the timer to {d}",
    "set me a timer for {d}", "can i get a timer for {d}", "a timer for {d}", "timer {d}",
    "let me know when {d} is up", "tell me when {d} have passed", "alert me in {d}", "ping me in {d}",
    "buzz me in {d}", "set a reminder for {d}", "remind me after {d}", "start a {d} countdown",
    "count down from {d}", "set a countdown for {d}", "i want a timer for {d}", "a {d} timer",
    "{d} on the timer", "set timer {d}", "put on a timer for {d}", "in {d} let me know",
    "set a timer for {d} for the {l}", "set a {l} timer for {d}", "{l} timer for {d}",
    "start a timer for the {l} for {d}", "set a timer called {l} for {d}", "time the {l} for {d}",
]
TIMER_BARE = ["set a timer", "start a timer", "i need a timer", "can you set a timer", "set a countdown",
              "timer please", "start a countdown", "set an alarm"]
CANCEL_FRAMES = [
    "cancel the timer", "stop the timer", "cancel my timer", "turn off the timer", "delete the timer",
    "never mind the timer", "kill the timer", "stop the countdown", "cancel the alarm", "get rid of the timer",
    "clear the timer", "abort the timer", "remove my timer", "scrap the timer", "cancel the countdown",
    "forget the timer", "switch off the timer", "stop my timer", "end the timer", "no more timer",
    "i don't need the timer anymore", "cancel it the timer", "stop the alarm", "call off the timer",
    "cancel the reminder", "disable the timer", "shut off the timer", "drop the timer",
]
VOLUME_SET_FRAMES = [
    "turn the volume to {n} percent", "set the volume to {n}", "volume {n} percent", "volume {n}",
    "change the volume to {n} percent", "make the volume {n}", "put the volume at {n} percent", "volume to {n}",
    "set volume {n}", "adjust the volume to {n} percent", "set the volume at {n} percent", "volume at {n}",
    "turn it to {n} percent", "set it to {n} percent volume", "make it {n} percent", "put it at {n} percent",
    "i want the volume at {n}", "change volume to {n}", "the volume should be {n} percent",
    "turn the sound to {n} percent", "set the sound to {n}", "speaker volume {n} percent",
    "set the speaker to {n} percent", "bring the volume to {n} percent", "take the volume to {n}",
    "{n} percent volume", "go to {n} percent volume", "set your volume to {n}", "move the volume to {n} percent",
    "drop the volume to {n} percent", "raise the volume to {n} percent", "lower the volume to {n}",
    "turn the volume down to {n} percent", "turn the volume up to {n}",
]
VOLUME_WORDS = [  # (frame, volume)
    ("mute", 0), ("mute the speaker", 0), ("mute yourself", 0), ("turn the volume off", 0), ("silence please", 0),
    ("volume to zero", 0), ("max volume", 100), ("maximum volume", 100), ("full volume", 100),
    ("turn the volume all the way up", 100), ("volume to the max", 100), ("half volume", 50),
    ("set the volume to half", 50), ("turn it all the way up", 100), ("put the volume on full", 100),
]
UP_FRAMES = [
    "turn the volume up", "turn it up", "louder", "make it louder", "volume up", "raise the volume",
    "increase the volume", "crank it up", "pump up the volume", "turn up the volume", "a bit louder",
    "speak louder", "can't hear you turn it up", "up the volume", "louder please", "more volume",
    "bump the volume up", "boost the volume", "turn the sound up", "make the sound louder", "be louder",
    "raise it", "increase the sound", "it's too quiet", "you're too quiet", "a little louder", "volume higher",
    "turn yourself up", "go louder", "i can barely hear you",
]
DOWN_FRAMES = [
    "turn the volume down", "turn it down", "quieter", "make it quieter", "volume down", "lower the volume",
    "decrease the volume", "softer", "turn down the volume", "a bit quieter", "be quieter", "too loud",
    "it's too loud", "you're too loud", "reduce the volume", "lower it", "quieter please", "less volume",
    "bring the volume down", "turn the sound down", "make the sound softer", "speak softer", "speak more quietly",
    "tone it down", "a little softer", "volume lower", "turn yourself down", "not so loud", "drop the volume",
    "keep it down",
]
LOT_UP = ["turn it up a lot", "much louder", "way louder", "turn the volume way up", "a lot louder",
          "crank the volume way up", "much more volume", "turn it up loads", "really loud please",
          "turn the volume up a lot"]
LOT_DOWN = ["turn it down a lot", "much quieter", "way quieter", "turn the volume way down", "a lot quieter",
            "much softer", "way too loud", "turn it down loads", "much less volume", "turn the volume down a lot"]

PREFIXES = ["", "", "", "", "um ", "uh ", "hey voxpipe ", "please ", "could you ", "can you ", "can you please ",
            "i want you to ", "would you ", "i'd like you to ", "okay ", "so ", "hey ", "voxpipe ", "i need you to ",
            "could you please ", "would you please ", "okay voxpipe ", "hi ", "er ", "alright ", "now ",
            "hey there ", "quick question ", "yo ", "well ", "just ", "go ahead and ", "kindly ", "oh "]
SUFFIXES = ["", "", "", "", " please", " thanks", " thank you", " for me", " now", " right now", " okay",
            " voxpipe", " if you can", " thanks a lot", " real quick", " would you", " please voxpipe", " ok"]
LABELS = ["pasta", "eggs", "tea", "laundry", "oven", "pizza", "rice", "bread", "cookies", "nap", "workout",
          "cake", "coffee", "potatoes", "soup", "homework", "meeting", "plank", "steak", "break", "chicken", "yoga"]

# Recognition slips: a word the recogniser may hear instead (the arguments copy what it wrote).
SLIPS = {"timer": ["time her", "timber", "time"], "set": ["sat", "said"], "the": ["a", "uh"],
         "volume": ["volumes", "volume in"], "what": ["what's", "but"], "minutes": ["minute", "minutes"],
         "cancel": ["cancels", "council"], "louder": ["lauder", "louder"], "quieter": ["quite her", "quiet"],
         "percent": ["per cent", "percent"], "turn": ["turned", "term"], "it": ["at", "it"], "for": ["four", "for"]}


def heldout_frame(frame, share):
    """Whether a frame (or filler) is in the held-out share: by its text's hash, stable across runs."""
    h = int(hashlib.sha256(frame.encode()).hexdigest()[:8], 16)
    return h % 1000 < share * 1000


def split(frames, share, key=lambda f: f):
    train = [f for f in frames if not heldout_frame(key(f), share)]
    held = [f for f in frames if heldout_frame(key(f), share)]
    return train, held


def slip(text, rng, rate):
    if rng.random() >= rate:
        return text
    ws = text.split()
    idx = [i for i, w in enumerate(ws) if w in SLIPS]
    if not idx:
        return text
    i = rng.choice(idx)
    ws[i] = rng.choice(SLIPS[ws[i]])
    return " ".join(ws)


# ------------------------------------------------------------------ tool results and spoken answers

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def time_result(rng):
    h, m = rng.randint(0, 23), rng.randint(0, 59)
    day, month, date, year = rng.choice(DAYS), rng.choice(MONTHS), rng.randint(1, 28), rng.randint(2025, 2030)
    if rng.random() < 0.8:
        clock = "%d:%02d %s" % ((h % 12) or 12, m, "AM" if h < 12 else "PM")
    else:
        clock = "%02d:%02d" % (h, m)
    return "It is %s on %s, %d %s %d." % (clock, day, date, month, year), clock, "%s, %d %s" % (day, date, month)


def time_answer(frame, clock, date, rng):
    if re.search(r"\b(day|date|today|month)\b", frame):
        return rng.choice(["It's %s.", "Today is %s."]) % date
    return rng.choice(["It's %s.", "It's %s.", "It is %s right now.", "The time is %s."]) % clock


NOT_LISTED = {
    "get_time": ["I can't see the time from here, sorry.", "I don't have a clock I can read here, sorry."],
    "set_timer": ["I can't set timers here, sorry.", "Sorry, I can't set a timer on this device."],
    "cancel_timer": ["I can't manage timers here, sorry.", "Sorry, there are no timers I can cancel here."],
    "volume": ["I can't change the volume here.", "Sorry, I can't change the volume on this device.",
               "The volume is set on your device. Try turning it up or down there."],
}

# ------------------------------------------------------------------ hard negatives: they mention the words only

NEGATIVES = [
    ("what is a timer", "A timer is a timepiece that measures a time interval and signals its end."),
    ("define timer", "A timer is a timepiece that measures a time interval and signals its end."),
    ("what does timer mean", "A timer is a timepiece that measures a time interval and signals its end."),
    ("define volume", "Volume is the amount of 3-dimensional space occupied by an object."),
    ("what is volume", "Volume is the amount of 3-dimensional space occupied by an object."),
    ("what does volume mean", "Volume is the amount of 3-dimensional space occupied by an object."),
    ("what is the volume of a sphere", "The volume of a sphere is four thirds times pi times the radius cubed."),
    ("how do you find the volume of a cube", "The volume of a cube is its side length cubed."),
    ("what is the volume of a cylinder", "The volume of a cylinder is pi times the radius squared times the height."),
    ("what time zone is london in", "London is on Greenwich Mean Time, and British Summer Time in summer."),
    ("what is a time zone", "A time zone is a region of the globe that keeps the same standard time."),
    ("tell me about the history of clocks",
     "People measured time with sundials and water clocks long before mechanical clocks appeared in medieval Europe."),
    ("who invented the clock", "Mechanical clocks appeared in Europe in the thirteenth century; no single inventor is known."),
    ("what is an alarm clock", "An alarm clock is a clock that wakes a sleeper at some preset time."),
    ("what is a clock", "A clock is a timepiece that shows the time of day."),
    ("what is time", "Time is the continuum of experience in which events pass from the future through the present to the past."),
    ("what does countdown mean", "A countdown is counting backward from some number to zero."),
    ("how many seconds are in a minute", "There are sixty seconds in a minute."),
    ("how many minutes are in an hour", "There are sixty minutes in an hour."),
    ("how many hours are in a day", "There are twenty four hours in a day."),
    ("what is a minute", "A minute is a unit of time equal to 60 seconds."),
    ("what is an hour", "An hour is a period of time equal to 60 minutes."),
    ("what is a second", "A second is one sixtieth of a minute."),
    ("what is a stopwatch", "A stopwatch is a timer that can be started and stopped to time an event."),
    ("what is loudness", "Loudness is the magnitude of sound, usually in a specified direction."),
    ("what is a decibel", "A decibel is a unit used to express the relative loudness of a sound."),
    ("what is a loudspeaker", "A loudspeaker is an electro-acoustic transducer that converts electrical signals into sounds."),
    ("what is a volume in a book series", "A volume is one book of a set of books, like one volume of an encyclopedia."),
    ("what is a percent", "A percent is a proportion in relation to a whole, one part in a hundred."),
    ("what does mute mean", "To mute is to deaden a sound or noise."),
    ("what is an egg timer", "An egg timer is a small timer for timing the boiling of eggs."),
    ("what time does the sun set", "That depends on where you are and the season. I can't look it up offline."),
    ("what is daylight saving time", "Daylight saving time is moving clocks forward an hour in summer for more evening daylight."),
    ("what is greenwich mean time", "Greenwich Mean Time is the mean solar time at the Greenwich meridian, used as a standard."),
    ("is it a good time to plant tomatoes", "Tomatoes are best planted in spring, after the last frost."),
    ("how long should i boil an egg", "About seven minutes gives a firm egg, and about five a soft one."),
    ("how long is a marathon", "A marathon is about forty two kilometres long."),
    ("what is a calendar", "A calendar is a system of timekeeping that defines the beginning and length of the year."),
    ("what is the speed of sound", "Sound travels at about 343 metres per second in air."),
    ("what does louder mean", "Louder means characterized by more sound, the comparative of loud."),
    ("tell me about volume knobs", "A volume knob is a control that sets how loud a device plays."),
    ("what's a good time to go to bed", "Most adults feel best with seven to nine hours of sleep."),
    ("what is a sundial", "A sundial is a timepiece that shows the time by the shadow of a pointer cast by the sun."),
    ("do you like timers", "I don't have feelings about timers, but they are handy in the kitchen."),
    ("what year was the first watch made", "The first portable watches were made in Germany in the sixteenth century."),
    ("what is an alarm", "An alarm is a device that signals the occurrence of some undesirable event."),
    ("what does remind mean", "To remind is to put in the mind of someone."),
    ("how loud is thunder", "Thunder can reach about 120 decibels close by."),
    ("why is time important", "Time lets us order events and plan what we do."),
    ("what time is it in tokyo", "I can only read the clock here, not the time in other cities."),
    ("how many minutes is an hour and a half", "An hour and a half is ninety minutes."),
    ("what is the volume of the earth", "The earth's volume is about a trillion cubic kilometres."),
]
NEG_PREFIXES = ["", "", "", "um ", "hey voxpipe ", "can you tell me ", "do you know ", "quick question ", "so "]


# ------------------------------------------------------------------ dialogue assembly

def scenario(rng, need=None, lack=None):
    """A tool list as a session may offer it: built-ins, a xiaozhi device's, an MCP server's, shuffled or not.

    need: a tool the list must hold; lack: tool names (or "volume") it must not hold."""
    for _ in range(100):
        r = rng.random()
        if r < 0.35:
            tools = list(BUILTIN)
        elif r < 0.75:
            tools = list(BUILTIN) + [DISTRACTORS[0]] + list(VOLUME)
            if rng.random() < 0.5:
                tools += rng.sample(DISTRACTORS[1:4], rng.randint(1, 3))
        elif r < 0.85:
            tools = list(BUILTIN) + rng.sample(DISTRACTORS[4:], rng.randint(1, 4))
        else:  # a random subset: one tool alone, volume without the timers, ...
            pool = BUILTIN + VOLUME + DISTRACTORS
            tools = rng.sample(pool, rng.randint(1, 6))
        if rng.random() < 0.3:
            rng.shuffle(tools)
        names = {t[0] for t in tools}
        if need and need not in names:
            continue
        if lack and any(l in names for l in lack):
            continue
        return tools
    raise RuntimeError("no scenario for need=%r lack=%r" % (need, lack))


def system_message(tools, rng):
    base = SYSTEM_PROMPT if rng.random() < 0.7 else ""
    s = system_with_tools(base, tools)
    return [{"role": "system", "content": s}] if s else []


def utter(frame, rng, prefixes, suffixes, slip_rate=0.12, **slots):
    """A request: a filler, the frame, a filler; a slip never touches a slot (the arguments copy the slots)."""
    text = slip(rng.choice(prefixes) + frame + rng.choice(suffixes), rng, slip_rate)
    return re.sub(r"\s+", " ", text.format(**slots)).strip()


class Maker:
    """Makes one kind of example at a time from a frame set (training's or the held-out one)."""

    def __init__(self, rng, frames, prefixes, suffixes):
        self.rng, self.f, self.pre, self.suf = rng, frames, prefixes, suffixes

    def request(self, kind):
        """(user text, intent dict) for one request of kind."""
        rng, f = self.rng, self.f
        if kind == "time":
            frame = rng.choice(f["time"])
            return utter(frame, rng, self.pre, self.suf), {"tool": "get_time", "args": {}, "frame": frame}
        if kind == "timer":
            frame = rng.choice(f["timer"])
            d, secs = duration(rng)
            label = rng.choice(LABELS)
            text = utter(frame, rng, self.pre, self.suf, d=d, l=label)
            args = {"duration": d}
            if "{l}" in frame:
                args["label"] = label
            return text, {"tool": "set_timer", "args": args, "seconds": secs, "frame": frame}
        if kind == "cancel":
            frame = rng.choice(f["cancel"])
            return utter(frame, rng, self.pre, self.suf), {"tool": "cancel_timer", "args": {}, "frame": frame}
        if kind == "volume_set":
            if rng.random() < 0.15:
                frame, n = rng.choice(f["volume_words"])
                return utter(frame, rng, self.pre, self.suf), {"tool": "self_audio_speaker_set_volume",
                                                               "args": {"volume": n}, "frame": frame}
            frame = rng.choice(f["volume_set"])
            n = rng.choice(list(range(0, 101)) + list(range(10, 101, 10)) * 3)
            text = utter(frame, rng, self.pre, self.suf, n=say(n, rng, 0.15))
            return text, {"tool": "self_audio_speaker_set_volume", "args": {"volume": n}, "frame": frame}
        if kind == "volume_step":
            r = rng.random()
            if r < 0.4:
                frame, step = rng.choice(f["up"]), 10
            elif r < 0.8:
                frame, step = rng.choice(f["down"]), -10
            elif r < 0.9:
                frame, step = rng.choice(f["lot_up"]), 20
            else:
                frame, step = rng.choice(f["lot_down"]), -20
            return utter(frame, rng, self.pre, self.suf), {"tool": "adjust_volume", "args": {"step": step},
                                                           "frame": frame}
        raise ValueError(kind)


def answer_after(intent, rng):
    """The tool's result text and the spoken answer that follows it."""
    tool, args = intent["tool"], intent["args"]
    if tool == "get_time":
        result, clock, date = time_result(rng)
        return result, time_answer(intent["frame"], clock, date, rng)
    if tool == "set_timer":
        secs = intent["seconds"]
        if rng.random() < 0.05 or secs > 86400:
            return "error: a timer can run for at most 24 hours", "Sorry, I can't set a timer that long."
        length = spoken_length(secs)
        lab = args.get("label")
        result = ("%s timer set for %s." % (lab.capitalize(), length)) if lab else "Timer set for %s." % length
        ans = rng.choice(["Okay, %s", "Done. %s", "Sure, %s", "%s"])
        text = result[0].lower() + result[1:] if "," in ans else result
        return result, ans % text
    if tool == "cancel_timer":
        if rng.random() < 0.3:
            return "There is no timer running.", rng.choice(["There is no timer running.",
                                                              "You don't have a timer running."])
        secs = rng.choice([60, 120, 300, 600, 900, 1500, 1800, 3600, 45, 90])
        m = spoken_length(secs).replace("minutes", "minute").replace("seconds", "second").replace("hours", "hour")
        result = "Cancelled the %s timer." % m
        return result, rng.choice(["Okay, I cancelled the %s timer.", "Done, the %s timer is cancelled.",
                                   "Okay, cancelled the %s timer."]) % m
    if tool == "self_audio_speaker_set_volume":
        if rng.random() < 0.06:
            return "error: the device did not answer", "Sorry, I couldn't change the volume."
        v = args["volume"]
        if v == 0:
            return "true", rng.choice(["Okay, muted.", "Okay, volume set to 0 percent."])
        return "true", rng.choice(["Okay, volume set to %d percent.", "Volume set to %d percent.",
                                   "Done, the volume is %d percent now."]) % v
    if tool == "adjust_volume":
        up = args["step"] > 0
        if rng.random() < 0.06:
            return "error: the device did not answer", "Sorry, I couldn't change the volume."
        if rng.random() < 0.5:
            level = rng.randint(3, 9) * 10 + (10 if up else -10) * (abs(args["step"]) // 10 - 1)
            level = max(0, min(100, level))
            return "Volume is now %d percent." % level, "Okay, the volume is now %d percent." % level
        return "true", rng.choice(["Okay, turned it up.", "Okay, louder."] if up else
                                  ["Okay, turned it down.", "Okay, quieter."])
    raise ValueError(tool)


KINDS = [("time", 0.2), ("timer", 0.34), ("cancel", 0.1), ("volume_set", 0.18), ("volume_step", 0.18)]


def pick_kind(rng):
    r, acc = rng.random(), 0.0
    for k, w in KINDS:
        acc += w
        if r < acc:
            return k
    return KINDS[-1][0]


def positive(maker, rng, ordinary):
    """A whole tool round: request, call, result, spoken answer; sometimes after an ordinary exchange."""
    kind = pick_kind(rng)
    text, intent = maker.request(kind)
    tools = scenario(rng, need=intent["tool"])
    msgs = system_message(tools, rng)
    if ordinary and rng.random() < 0.2:
        q, a = rng.choice(ordinary)
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": text, "ask": True})
    msgs.append({"role": "assistant", "content": tool_call(intent["tool"], intent["args"])})
    call_only = [dict(m) for m in msgs]
    msgs[-2] = {"role": "user", "content": text}  # the server puts passages in the request only, not the history
    result, spoken = answer_after(intent, rng)
    msgs.append({"role": "user", "content": tool_response(result)})
    msgs.append({"role": "assistant", "content": spoken})
    if ordinary and rng.random() < 0.15:  # the conversation goes on without tools
        q, a = rng.choice(ordinary)
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return [{"messages": call_only, "src": "tools-call", "kind": kind}, {"messages": msgs, "src": "tools", "kind": kind}]


def not_listed(maker, rng):
    """The same requests where their tool is not offered: answered in words."""
    kind = pick_kind(rng)
    text, intent = maker.request(kind)
    lack = ["self_audio_speaker_set_volume", "adjust_volume"] if kind.startswith("volume") else [intent["tool"]]
    tools = scenario(rng, lack=lack) if rng.random() < 0.8 else []
    msgs = system_message(tools, rng)
    key = "volume" if kind.startswith("volume") else intent["tool"]
    msgs += [{"role": "user", "content": text, "ask": True},
             {"role": "assistant", "content": rng.choice(NOT_LISTED[key])}]
    return {"messages": msgs, "src": "tools-unlisted", "kind": kind}


def bare_timer(rng, frames, prefixes, suffixes):
    text = utter(rng.choice(frames), rng, prefixes, suffixes)
    msgs = system_message(scenario(rng, need="set_timer"), rng)
    msgs += [{"role": "user", "content": text, "ask": True},
             {"role": "assistant", "content": rng.choice(["For how long?", "Sure, for how long?",
                                                          "How long should the timer run?"])}]
    return {"messages": msgs, "src": "tools-bare", "kind": "bare"}


def negative(rng, items, prefixes):
    q, a = rng.choice(items)
    text = slip(rng.choice(prefixes) + q, rng, 0.08)
    tools = scenario(rng) if rng.random() < 0.85 else []
    msgs = system_message(tools, rng)
    msgs += [{"role": "user", "content": text.strip(), "ask": True}, {"role": "assistant", "content": a}]
    return {"messages": msgs, "src": "tools-negative", "kind": "negative"}


def frame_sets(share):
    """Training and held-out frame sets: every list split by its frames' hashes."""
    lists = {"time": TIME_FRAMES, "timer": TIMER_FRAMES, "cancel": CANCEL_FRAMES, "volume_set": VOLUME_SET_FRAMES,
             "volume_words": VOLUME_WORDS, "up": UP_FRAMES, "down": DOWN_FRAMES, "lot_up": LOT_UP,
             "lot_down": LOT_DOWN}
    train, held = {}, {}
    for k, v in lists.items():
        key = (lambda f: f[0]) if k == "volume_words" else (lambda f: f)
        train[k], held[k] = split(v, share, key)
        if not held[k]:  # every list holds some out
            held[k], train[k] = train[k][-1:], train[k][:-1]
    return train, held


def asr_form(q):
    q = re.sub(r"[^a-z0-9' ]+", " ", q.lower())
    return re.sub(r"\s+", " ", q).strip()


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f]


def plan(args):
    """The tool dialogues and the held-out evaluation sets; deterministic for a seed."""
    rng = random.Random(args.seed)
    train_f, held_f = frame_sets(args.heldout_share)
    pre_t, pre_h = split(PREFIXES, 0.15)
    suf_t, suf_h = split(SUFFIXES, 0.15)
    pre_t, suf_t = [""] * 4 + [p for p in pre_t if p], [""] * 4 + [s for s in suf_t if s]
    neg_t, neg_h = split(NEGATIVES, args.heldout_share, key=lambda x: x[0])
    bare_t, bare_h = split(TIMER_BARE, 0.25)
    train_d = load(os.path.join(args.data, "train.jsonl"))
    ordinary = []
    for d in train_d[:20000]:
        m = d["messages"]
        if d.get("src") in ("wordnet", "smalltalk") and len(m) >= 2 and m[-2]["role"] == "user" \
                and not m[-2]["content"].startswith("Facts"):
            ordinary.append((m[-2]["content"], m[-1]["content"]))
    tm = Maker(rng, train_f, pre_t, suf_t)
    out = []
    for _ in range(args.positives):
        out.extend(positive(tm, rng, ordinary))
    for _ in range(args.unlisted):
        out.append(not_listed(tm, rng))
    for _ in range(args.bare):
        out.append(bare_timer(rng, bare_t, pre_t, suf_t))
    for _ in range(args.negatives):
        out.append(negative(rng, neg_t, NEG_PREFIXES))
    valid = [d for _ in range(200) for d in positive(tm, rng, ordinary)] + [negative(rng, neg_t, NEG_PREFIXES) for _ in range(50)]
    # Held-out evaluation: frames (and some fillers) never trained on.
    erng = random.Random(args.seed + 99)
    hm = Maker(erng, held_f, pre_t[:4] + pre_h * 2 + pre_t, suf_t[:4] + suf_h * 2 + suf_t)
    ev = []
    for i in range(args.eval_n):
        kind = KINDS[i % len(KINDS)][0]
        text, intent = hm.request(kind)
        device = "xiaozhi" if kind.startswith("volume") or erng.random() < 0.5 else "builtin"
        want = intent["tool"]
        if kind.startswith("volume") and erng.random() < 0.15:
            device, want = "builtin", ""  # not listed: must answer in words
        ev.append({"text": text, "device": device, "want": want, "args": intent["args"],
                   "seconds": intent.get("seconds") if want else None, "frame": intent["frame"]})
    negs = []
    for q, _ in neg_h:
        for p in ("", "um ", "hey voxpipe "):
            negs.append({"text": p + q, "device": erng.choice(["xiaozhi", "builtin"]), "want": "", "frame": q})
    # Ordinary questions of the corpus's validation set (never trained on), as the recogniser writes them.
    vrows = load(os.path.join(args.raw, "valid.jsonl"))
    erng.shuffle(vrows)
    for d in vrows[:args.eval_ordinary]:
        q = next(m["content"] for m in d["messages"] if m["role"] == "user")
        negs.append({"text": asr_form(q), "device": erng.choice(["xiaozhi", "builtin"]), "want": "",
                     "frame": "valid:" + d.get("src", "")})
    return out, valid, ev, negs


def cmd_questions(args):
    out, valid, ev, negs = plan(args)
    qs = set()
    for d in out + valid:
        for m in d["messages"]:
            if m.get("ask") and rng_ground(args, m["content"]):
                qs.add(m["content"])
    os.makedirs(args.work, exist_ok=True)
    with open(os.path.join(args.work, "questions.txt"), "w", encoding="utf-8") as f:
        for q in sorted(qs):
            f.write(q + "\n")
    for name, rows in (("eval-tools", ev), ("eval-negatives", negs)):
        with open(os.path.join(args.work, name + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(json.dumps({"tool_questions": len(qs), "dialogues": len(out), "eval_tools": len(ev),
                      "eval_negatives": len(negs)}))


def rng_ground(args, text):
    """Whether a request gets the knowledge passages (decided by its text, so both steps agree)."""
    h = int(hashlib.sha256(("g" + text).encode()).hexdigest()[:8], 16)
    return h % 1000 < args.ground_share * 1000


def cmd_apply(args):
    out, valid, _, _ = plan(args)
    found = {}
    with open(os.path.join(args.work, "answers.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            found[r["question"]] = r
    rng = random.Random(args.seed + 5)
    grounded = 0
    for d in out + valid:
        for m in d["messages"]:
            if m.pop("ask", False):
                r = found.get(m["content"])
                if r and r["passages"]:
                    m["content"] = r["augmented"]
                    grounded += 1
    train = load(os.path.join(args.data, "train.jsonl"))
    listed = 0
    for d in train:  # ordinary dialogues with tool lists, answers unchanged: a list is no reason to call
        if rng.random() < args.listed_share:
            tools = scenario(rng)
            msgs = d["messages"]
            if msgs and msgs[0]["role"] == "system":
                msgs[0]["content"] = system_with_tools(msgs[0]["content"], tools)
            else:
                msgs.insert(0, {"role": "system", "content": system_with_tools("", tools)})
            listed += 1
    for _ in range(args.repeat):
        train += out
    rng.shuffle(train)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train.jsonl"), "w", encoding="utf-8") as f:
        for d in train:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    vd = load(os.path.join(args.data, "valid.jsonl"))
    with open(os.path.join(args.out, "valid.jsonl"), "w", encoding="utf-8") as f:
        for d in vd:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "valid-tools.jsonl"), "w", encoding="utf-8") as f:
        for d in valid:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    for name in ("heldout.jsonl",):
        with open(os.path.join(args.data, name), encoding="utf-8") as src, \
                open(os.path.join(args.out, name), "w", encoding="utf-8") as dst:
            dst.write(src.read())
    print(json.dumps({"train": len(train), "tool_dialogues": len(out) * args.repeat, "grounded_requests": grounded,
                      "ordinary_with_tool_lists": listed, "valid_tools": len(valid)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["questions", "apply"])
    ap.add_argument("--data", default="build/train-data-grounded", help="grounding.py's output")
    ap.add_argument("--raw", default="build/train-data", help="prepare.py's output (its valid.jsonl questions)")
    ap.add_argument("--eval-ordinary", type=int, default=300, help="validation questions in eval-negatives.jsonl")
    ap.add_argument("--work", default="build/tools")
    ap.add_argument("--out", default="build/train-data-tools")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--positives", type=int, default=9000, help="whole tool rounds")
    ap.add_argument("--unlisted", type=int, default=1800, help="requests whose tool is not listed")
    ap.add_argument("--bare", type=int, default=300, help="timer requests with no length")
    ap.add_argument("--negatives", type=int, default=2500, help="questions that only mention the words")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--listed-share", type=float, default=0.25, help="share of ordinary dialogues given tool lists")
    ap.add_argument("--ground-share", type=float, default=0.75, help="share of requests with knowledge passages")
    ap.add_argument("--heldout-share", type=float, default=0.2, help="share of frames kept for evaluation")
    ap.add_argument("--eval-n", type=int, default=500, help="held-out tool requests written for evaluation")
    args = ap.parse_args()
    {"questions": cmd_questions, "apply": cmd_apply}[args.step](args)


if __name__ == "__main__":
    main()
