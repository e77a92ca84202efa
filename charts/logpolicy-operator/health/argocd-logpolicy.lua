-- Argo CD health check for logpolicy.dev/LogPolicy (resource.customizations.health.logpolicy.dev_LogPolicy).
-- Degraded: the spec is refused (Stalled). Progressing: not observed yet, or pushes in flight (Reconciling).
-- Healthy: every selected pod acknowledged it, it selects no pod, or it expired (Expired=True).
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to write a status"
  return hs
end
if obj.metadata ~= nil and obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. obj.metadata.generation
  return hs
end
local by = {}
for _, c in ipairs(obj.status.conditions) do
  by[c.type] = c
end
if by.Stalled ~= nil and by.Stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = by.Stalled.message
  return hs
end
if by.Expired ~= nil and by.Expired.status == "True" then
  hs.status = "Healthy"
  hs.message = by.Expired.message
  return hs
end
if by.Reconciling ~= nil and by.Reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = by.Reconciling.message
  return hs
end
if by.Ready ~= nil and by.Ready.status == "True" then
  hs.status = "Healthy"
  if by.Applied ~= nil then
    hs.message = by.Applied.reason .. ": " .. by.Applied.message
  else
    hs.message = by.Ready.message
  end
  return hs
end
hs.status = "Progressing"
hs.message = "Waiting for the policy to be valid and in force"
return hs
