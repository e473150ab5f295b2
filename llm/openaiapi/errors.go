package openaiapi

import "net/http"

// apiError is OpenAI's error body: {"error":{"message","type","param","code"}}.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func strPtr(s string) *string { return &s }

func invalidRequest(msg string, param string) *apiError {
	e := &apiError{status: http.StatusBadRequest, Message: msg, Type: "invalid_request_error"}
	if param != "" {
		e.Param = strPtr(param)
	}
	return e
}

func modelNotFound(model string) *apiError {
	return &apiError{
		status:  http.StatusNotFound,
		Message: "The model `" + model + "` does not exist or you do not have access to it.",
		Type:    "invalid_request_error",
		Param:   strPtr("model"),
		Code:    strPtr("model_not_found"),
	}
}

func busy() *apiError {
	return &apiError{
		status:  http.StatusTooManyRequests,
		Message: "The model is busy with other requests; retry shortly.",
		Type:    "requests",
		Code:    strPtr("rate_limit_exceeded"),
	}
}

func serverError(msg string) *apiError {
	return &apiError{status: http.StatusInternalServerError, Message: msg, Type: "server_error"}
}
