-- Managed by specdec.serve.gateway: fetch lua.model_keys, the number of keys of the request body's
-- top-level JSON object that read "model" once their escapes are decoded ("model", "mod\u0065l").
-- HAProxy's json_query routes by the first such key, Python's json (the engines) reads the last:
-- the gateway refuses a body with more than one. Keys of nested objects (a JSON schema's
-- "properties": {"model": ...}) and strings are skipped, never counted.

local SIMPLE = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }

-- A JSON string's raw text decoded; a character that cannot be part of "model" becomes NUL.
local function decoded(raw)
  if not string.find(raw, '\\', 1, true) then
    return raw
  end
  local out, i, n = {}, 1, #raw
  while i <= n do
    local c = string.sub(raw, i, i)
    if c ~= '\\' then
      out[#out + 1] = c
      i = i + 1
    elseif string.sub(raw, i + 1, i + 1) == 'u' then
      local hex = string.sub(raw, i + 2, i + 5)
      local code = string.match(hex, '^%x%x%x%x$') and tonumber(hex, 16)
      out[#out + 1] = (code and code < 128) and string.char(code) or '\0'
      i = i + 6
    else
      out[#out + 1] = SIMPLE[string.sub(raw, i + 1, i + 1)] or '\0'
      i = i + 2
    end
  end
  return table.concat(out)
end

local function model_keys(body)
  local count, depth, pos = 0, 0, 1
  while true do
    local at = string.find(body, '[{}%[%]"]', pos)
    if not at then
      return count
    end
    local c = string.byte(body, at)
    if c == 34 then -- a string: find its closing quote, skipping escaped characters
      local stop, from = nil, at + 1
      while true do
        local q = string.find(body, '["\\]', from)
        if not q then
          return count
        end
        if string.byte(body, q) == 92 then
          from = q + 2
        else
          stop = q
          break
        end
      end
      if depth == 1 and string.find(body, '^[ \t\r\n]*:', stop + 1) and decoded(string.sub(body, at + 1, stop - 1)) == 'model' then
        count = count + 1
      end
      pos = stop + 1
    elseif c == 123 or c == 91 then
      depth = depth + 1
      pos = at + 1
    else
      depth = depth - 1
      pos = at + 1
    end
  end
end

core.register_fetches('model_keys', function(txn)
  return model_keys(txn.f:req_body() or '')
end)
