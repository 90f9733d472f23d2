-- Argo CD health for derivedviews.io/DerivedView.
-- The operator writes kstatus conditions (Ready, Reconciling, Stalled) plus
-- CaughtUp and Degraded, each with an integer observedGeneration; this maps
-- them onto Argo CD's health states. A view whose operator has not yet seen
-- the latest spec is Progressing, never Healthy on a stale Ready.
local hs = {}

local function condition(status, kind)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function is_true(c)
  return c ~= nil and c.status == "True"
end

local function text(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local annotations = obj.metadata.annotations
if annotations ~= nil and annotations["derivedviews.io/paused"] == "true" then
  hs.status = "Suspended"
  hs.message = "Paused by the derivedviews.io/paused annotation: only status is updated"
  return hs
end

local status = obj.status
local generation = obj.metadata.generation or 0
if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe the view"
  return hs
end
if status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local serving = ""
if status.active ~= nil and status.active.revision ~= nil then
  serving = " (revision " .. status.active.revision .. " keeps serving)"
end

local stalled = condition(status, "Stalled")
local degraded = condition(status, "Degraded")
if is_true(stalled) or is_true(degraded) then
  local c = stalled
  if not is_true(c) then
    c = degraded
  end
  hs.status = "Degraded"
  hs.message = (c.reason or "Degraded") .. ": " .. text(c, "see kubectl describe") .. serving
  return hs
end

local reconciling = condition(status, "Reconciling")
if is_true(reconciling) then
  hs.status = "Progressing"
  local message = text(reconciling, "Reconciling")
  if status.candidate ~= nil and status.candidate.lag ~= nil
      and status.candidate.lag.messages ~= nil then
    message = message .. "; candidate " .. (status.candidate.revision or "?") .. " is "
      .. tostring(status.candidate.lag.messages) .. " messages behind"
  end
  hs.message = message
  return hs
end

local ready = condition(status, "Ready")
if is_true(ready) then
  hs.status = "Healthy"
  hs.message = text(ready, "Serving")
  return hs
end

hs.status = "Progressing"
hs.message = text(ready, "Waiting for the view to become Ready")
return hs
